"""Two config-syncs, active + standby, on a real mosquitto and git, served by real uvicorn.

Only the holder of the lease publishes; when it stops without a word the standby takes
over within the lease, reads back what is published and publishes only what differs (each
changed manifest's generation advances once per commit), and a webhook the standby
answered during the handover is deployed.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path

import httpx
import pytest

from config_sync.lease_client import NotActive
from config_sync.service import ConfigSync
from phrame.mqtt import MqttClient, MqttSettings
from phrame.mqtt.messages import Message
from schemas import Topics
from tests.integration.test_sync_app import delivery, serving
from tests.support.mosquitto import Mosquitto
from tests.support.sync_support import SAMPLE, SECRET, ConfigRemote, settings_for
from tests.support.waiting import wait_for

pytestmark = pytest.mark.slow

LEASE_S = 3.0
SERVICE_FILE = "environments/studio-a/services/asset-cache.yaml"
TOPICS = Topics()
SYNC = TOPICS.env_sync("studio-a")
MANIFEST = TOPICS.manifest("core-01")


def service_yaml(tag: str) -> str:
    return f"name: asset-cache\nimage: registry.studio.test/cache:{tag}\nplacement:\n  node: core-01\n"


class Recorder:
    """Every live message on the desired plane, in order (retained replays left out)."""

    def __init__(self, url: str) -> None:
        self.messages: list[tuple[str, bytes]] = []
        self._lock = threading.Lock()
        self.client = MqttClient(MqttSettings(url=url), "test-ha-recorder")

    def on_message(self, message: Message) -> None:
        if not message.retain:
            with self._lock:
                self.messages.append((message.topic, message.payload))

    def mark(self) -> int:
        with self._lock:
            return len(self.messages)

    def since(self, mark: int, topic: str) -> list[bytes]:
        with self._lock:
            return [p for t, p in self.messages[mark:] if t == topic and p]


def applied(url: str) -> str | None:
    """The commit the broker's retained sync topic says was applied."""
    client = MqttClient(MqttSettings(url=url), f"test-ha-read-{time.monotonic_ns()}")
    client.start(timeout=10)
    try:
        raw = client.collect_retained(SYNC, settle=0.1).get(SYNC)
    finally:
        client.stop()
    if not raw:
        return None
    commit = json.loads(raw).get("last_applied", {}).get("commit")
    return commit if isinstance(commit, str) else None


def post_push(url: str, key: str) -> httpx.Response:
    headers, body = delivery("push.json", **{"Idempotency-Key": key})
    return httpx.post(f"{url}/webhooks/gitlab", content=body, headers=headers, timeout=10)


@pytest.fixture
def pair(tmp_path: Path, mosquitto: Mosquitto) -> Iterator[tuple[ConfigRemote, list[ConfigSync], list[str]]]:
    remote = ConfigRemote(tmp_path)
    remote.commit("sample", copy_from=SAMPLE)
    services: list[ConfigSync] = []
    urls: list[str] = []
    with ExitStack() as stack:
        for name in ("cs-a", "cs-b"):
            settings = settings_for(
                remote,
                tmp_path / f"state-{name}",
                mosquitto.url,
                webhook_secret=SECRET,
                poll_s=3600,
                debounce_s=0,
                ha_lease_s=LEASE_S,
                instance_id=name,
            )
            service = ConfigSync(settings)
            urls.append(stack.enter_context(serving(service)))
            services.append(service)
            if name == "cs-a":  # the first one takes the free lease; the second finds it held
                wait_for(lambda s=service: s.role == "active" and s.queue.wait_idle(0), "cs-a active", 20)  # type: ignore[misc]
        yield remote, services, urls


def test_only_the_holder_publishes_and_the_standby_takes_over_within_the_lease(
    pair: tuple[ConfigRemote, list[ConfigSync], list[str]], mosquitto: Mosquitto
) -> None:
    remote, (a, b), (url_a, url_b) = pair
    recorder = Recorder(mosquitto.url)
    recorder.client.start(timeout=10)
    try:
        recorder.client.subscribe(TOPICS.desired_filter(), recorder.on_message)
        wait_for(lambda: a.started_at is not None and a.queue.wait_idle(0), "cs-a's first sync", 30)
        # the standby: connected, not started, and says so
        assert (a.role, b.role) == ("active", "standby")
        ready_b = httpx.get(f"{url_b}/readyz", timeout=5)
        assert ready_b.status_code == 200 and ready_b.json() == {"ready": True, "role": "standby"}
        assert httpx.get(f"{url_a}/readyz", timeout=5).json()["role"] == "active"
        status_b = httpx.get(f"{url_b}/status", headers={"X-Gitlab-Token": SECRET}, timeout=5).json()
        assert status_b["role"] == "standby" and status_b["lease"]["holder"] == "cs-a"
        assert b"phrame_config_sync_active 0.0" in httpx.get(f"{url_b}/metrics", timeout=5).content
        # deploy-scope writes go to the active: the standby names it
        refused = httpx.post(
            f"{url_b}/environments/studio-a/rollback",
            headers={"Authorization": f"Bearer {SECRET}"},
            timeout=5,
        )
        assert refused.status_code == 503 and "cs-a" in refused.json()["error"]

        # a commit, its webhook sent to both (as the dev stack's hook does): only cs-a publishes
        mark = recorder.mark()
        c1 = remote.commit("cache 1", files={SERVICE_FILE: service_yaml("1")})
        assert post_push(url_a, "c1-a").status_code == 202
        assert post_push(url_b, "c1-b").status_code == 202  # queued by the standby
        wait_for(lambda: applied(mosquitto.url) == c1, "c1 applied", 30)
        manifests = recorder.since(mark, MANIFEST)
        assert len(manifests) == 1, "one manifest per commit"
        gen1 = json.loads(manifests[0])["generation"]
        assert b.started_at is None and b.sync_counts == {}
        assert b.mqtt.refused == 0  # type: ignore[attr-defined]  # it did not even try

        # cs-a stops without a word (its lease stays on the broker), a commit lands and its
        # webhook reaches only the standby
        mark = recorder.mark()
        a.lease.stop()  # type: ignore[union-attr]
        a.stop()
        stopped = time.monotonic()
        c2 = remote.commit("cache 2", files={SERVICE_FILE: service_yaml("2")})
        answer = post_push(url_b, "c2-b")
        assert answer.status_code == 202 and answer.json()["status"] == "queued"
        wait_for(lambda: b.role == "active", "cs-b to take over", 3 * LEASE_S)
        took = time.monotonic() - stopped
        print(f"\nhandover after the active stopped: {took:.2f} s (lease {LEASE_S:g} s)")
        assert took <= LEASE_S + 2.0, f"took over after {took:.1f} s (lease {LEASE_S} s)"
        wait_for(lambda: applied(mosquitto.url) == c2, "c2 applied by cs-b", 30)
        assert b.queue.wait_idle(30)
        # no duplicate: cs-b read back what cs-a published and sent the one manifest that differs
        manifests = recorder.since(mark, MANIFEST)
        assert [json.loads(m)["generation"] for m in manifests] == [gen1 + 1]
        status_b = httpx.get(f"{url_b}/status", headers={"X-Gitlab-Token": SECRET}, timeout=5).json()
        assert status_b["role"] == "active" and status_b["lease"]["term"] == 2
    finally:
        recorder.client.stop()


def test_an_active_whose_renewals_stop_is_fenced_and_told_it_lost(
    pair: tuple[ConfigRemote, list[ConfigSync], list[str]], mosquitto: Mosquitto
) -> None:
    """A paused active (its lease loop stopped, its connection alive): the standby takes over,
    and the old active publishes nothing from then on, is told it lost the lease, and the
    lease topic alone still passes its fence."""
    _remote, (a, b), _urls = pair
    wait_for(lambda: a.started_at is not None and a.queue.wait_idle(0), "cs-a's first sync", 30)
    lost: list[str] = []
    a.on_lost = lost.append
    with pytest.raises(NotActive):
        b.mqtt.publish(TOPICS.env_sync("studio-a"), b"{}")  # the standby's fence
    assert a.lease is not None
    a.lease._loop.stop()  # no more renewals, as if the process were stopped
    wait_for(lambda: b.role == "active", "cs-b to take over", 3 * LEASE_S)
    wait_for(lambda: lost, "cs-a to be told it lost the lease", 10)
    assert "cs-b holds term 2" in lost[0] or "not renewed" in lost[0]
    assert a.role == "standby" and not a.lease.may_publish()
    with pytest.raises(NotActive):
        a.mqtt.publish(TOPICS.env_sync("studio-a"), b"{}")
    a.mqtt.publish(a.lease.topic, None)  # exempt: the lease's own topic (cleared here)
    wait_for(lambda: b.started_at is not None and b.queue.wait_idle(0), "cs-b's first sync", 30)
