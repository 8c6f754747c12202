"""Staged rollouts in config-sync over a real broker and a real git remote.

The agents are stood in for by a test client publishing their container reports on the
actual plane (the whole loop with real containers is tests/e2e/test_rollouts.py): what is
checked here is config-sync's side: which replicas' items change on the broker and when,
that held-back items stay byte for byte, the retained rollout state, ``phrame/deploy``
and the ``sync`` topic, a rollback, a promotion and a restart of config-sync mid-rollout.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from config_sync.app import create_app
from config_sync.reporting import LocalReporter
from config_sync.service import ConfigSync
from phrame.mqtt import MqttClient
from phrame.settings.http_serving import make_server
from schemas import Topics, check_payload
from tests.support.mosquitto import Mosquitto
from tests.support.services import eventually, free_port
from tests.support.sync_support import SECRET, ConfigRemote, desired_on_broker, reader, settings_for
from tests.support.waiting import wait_for

T = Topics()
NODES = ("n1", "n2")
REPLICAS = [("n1", "lab.web.0"), ("n2", "lab.web.1"), ("n1", "lab.web.2"), ("n2", "lab.web.3")]


def _files(image: str, update: str) -> dict[str, str]:
    files = {f"nodes/{n}.yaml": f"name: {n}\nlabels:\n  role: edge\n" for n in NODES}
    files["environments/lab/environment.yaml"] = "name: lab\n"
    files["environments/lab/node.json"] = json.dumps(
        {
            "schema": "phrame.placement/v1",
            "environment": "lab",
            "assignments": {"web": ["n1", "n2", "n1", "n2"]},
        }
    )
    files["environments/lab/services/web.yaml"] = (
        f"name: web\nimage: {image}\nreplicas: 4\nplacement:\n  labels:\n    role: edge\nupdate:\n{update}"
    )
    return files


WAVES_OF_ONE = "  max_parallel: 1\n  min_healthy_s: 0.3\n  healthy_deadline_s: 20\n"


def item_topic(node: str, item: str) -> str:
    return T.desired_item(node, "containers", item)


class Fleet:
    """Stands in for the agents: reports a replica running a digest, healthy or not."""

    def __init__(self, client: MqttClient) -> None:
        self.client = client

    def report(
        self, node: str, item: str, digest: str, *, health: str | None = "healthy", restarts: int = 0
    ) -> None:
        doc = {"state": "running", "health": health, "digest": digest, "started_at": f"t-{digest[-6:]}"}
        doc["restart_count"] = restarts
        self.client.publish_batch([(T.actual_item(node, "containers", item), json.dumps(doc).encode())])

    def run_what_is_published(self, published: dict[str, bytes], *, health: str | None = "healthy") -> None:
        for node, item in REPLICAS:
            raw = published.get(item_topic(node, item))
            if raw:
                self.report(node, item, json.loads(raw)["digest"], health=health)


@pytest.fixture
def remote(tmp_path: Path) -> ConfigRemote:
    return ConfigRemote(tmp_path)


@pytest.fixture
def fleet(mosquitto: Mosquitto) -> Iterator[Fleet]:
    with reader(mosquitto.url, "fake-agents") as client:
        yield Fleet(client)


def _start(remote: ConfigRemote, tmp_path: Path, mosquitto: Mosquitto) -> ConfigSync:
    settings = settings_for(
        remote, tmp_path / "state", mosquitto.url, poll_s=3600, debounce_s=0, deploy_timeout_s=60
    )
    service = ConfigSync(settings, reporter=LocalReporter())
    service.start()
    assert service.queue.wait_idle(30)
    return service


def _rollout(broker: dict[str, bytes]) -> dict[str, Any] | None:
    raw = broker.get(T.env_rollout("lab", "web"))
    if not raw:
        return None
    doc = json.loads(raw)
    check_payload("desired-rollout", doc)
    return doc


def _digests(broker: dict[str, bytes]) -> list[str | None]:
    out = []
    for node, item in REPLICAS:
        raw = broker.get(item_topic(node, item))
        out.append(json.loads(raw)["digest"] if raw else None)
    return out


def _deploy(service: ConfigSync, sha: str) -> tuple[str, str] | None:
    found = [
        (s["state"], s["description"])
        for s in service.reporter.snapshot()["statuses"]
        if s["name"] == "phrame/deploy" and s["sha"] == sha
    ]
    return found[-1] if found else None


@pytest.mark.slow
def test_waves_of_one_each_after_the_previous_is_healthy(
    tmp_path: Path, mosquitto: Mosquitto, remote: ConfigRemote, fleet: Fleet
) -> None:
    remote.commit("v1", files=_files("web:1", WAVES_OF_ONE))
    service = _start(remote, tmp_path, mosquitto)
    try:
        with reader(mosquitto.url) as watch:
            first = desired_on_broker(watch)
            old = _digests(first)
            assert None not in old and _rollout(first) is None  # nothing published before: no waves
            fleet.run_what_is_published(first)
            v2 = remote.commit("v2", files=_files("web:2", WAVES_OF_ONE))
            service.trigger_sync("main")
            assert service.queue.wait_idle(30)
            broker = desired_on_broker(watch)
            new = _digests(broker)
            assert new[0] != old[0] and new[1:] == old[1:]
            for node, item in REPLICAS[1:]:  # held back: the very bytes published before
                assert broker[item_topic(node, item)] == first[item_topic(node, item)]
            assert broker[T.manifest("n2")] == first[T.manifest("n2")]  # n2's agent has nothing to do
            state = _rollout(broker)
            assert state is not None and (state["state"], state["wave"], state["waves"]) == (
                "progressing",
                1,
                4,
            )
            assert state["commit"] == v2 and state["total"] == 4
            deploy = _deploy(service, v2)
            assert deploy is not None and deploy[0] == "running" and "wave 1/4" in deploy[1]
            sync = json.loads(broker[T.env_sync("lab")])
            assert sync["commit"] == v2 and sync["rollouts"] == [
                {"service": "web", "state": "progressing", "reasons": []}
            ]
            assert sync["last_applied"]["commit"] != v2  # not applied until the rollout completes
            # the wave does not move while its replica is not reported on the new spec
            assert not eventually(lambda: _digests(desired_on_broker(watch))[1] != old[1], timeout=1.0)
            # a commit that does not change web (a README) goes on with the same rollout and
            # takes its deployment over
            head = remote.commit("readme", files={"README.md": "notes\n"})
            service.trigger_sync("main")
            assert service.queue.wait_idle(30)
            assert _deploy(service, v2) == ("canceled", f"superseded by {head[:12]}")
            deploy = _deploy(service, head)
            assert deploy is not None and deploy[0] == "running" and "wave 1/4" in deploy[1]
            assert (_rollout(desired_on_broker(watch)) or {}).get("commit") == v2
            seen_off: list[int] = []
            for wave in range(4):
                node, item = REPLICAS[wave]
                target = _digests(desired_on_broker(watch))[wave]
                assert target == new[0] or wave == 0 or target != old[wave]
                fleet.report(node, item, str(target))
                if wave < 3:
                    assert eventually(
                        lambda w=wave: _digests(desired_on_broker(watch))[w + 1] != old[w + 1], 10
                    ), f"wave {wave + 2} never started"
                digests = _digests(desired_on_broker(watch))
                seen_off.append(sum(1 for i, d in enumerate(digests) if d != old[i]) - (wave + 1))
            assert max(seen_off) <= 1  # never more than the next wave released before health
            assert eventually(
                lambda: (_rollout(desired_on_broker(watch)) or {}).get("state") == "complete", 10
            )
            done = _rollout(desired_on_broker(watch))
            assert done is not None and (done["done"], done["wave"]) == (4, 4)
            sync = json.loads(desired_on_broker(watch)[T.env_sync("lab")])
            assert sync["last_applied"]["commit"] == head and "rollouts" not in sync
            # handed to the deploy watch: nodes converged on their last generations
            manifests = {n: json.loads(desired_on_broker(watch)[T.manifest(n)]) for n in NODES}
            statuses = [
                (T.status(n), json.dumps({"state": "online", "converged": True, **manifests[n]}).encode())
                for n in NODES
            ]
            fleet.client.publish_batch(statuses)
            assert eventually(lambda: (_deploy(service, head) or ("",))[0] == "success", 10), _deploy(
                service, head
            )
    finally:
        service.stop()


@pytest.mark.slow
def test_unhealthy_first_wave_pauses_the_rest_untouched(
    tmp_path: Path, mosquitto: Mosquitto, remote: ConfigRemote, fleet: Fleet
) -> None:
    remote.commit("v1", files=_files("web:1", WAVES_OF_ONE))
    service = _start(remote, tmp_path, mosquitto)
    try:
        with reader(mosquitto.url) as watch:
            first = desired_on_broker(watch)
            fleet.run_what_is_published(first)
            bad = remote.commit("bad", files=_files("web:bad", WAVES_OF_ONE))
            service.trigger_sync("main")
            assert service.queue.wait_idle(30)
            target = _digests(desired_on_broker(watch))[0]
            fleet.report("n1", "lab.web.0", str(target), health="unhealthy")
            assert eventually(lambda: (_rollout(desired_on_broker(watch)) or {}).get("state") == "paused", 10)
            broker = desired_on_broker(watch)
            state = _rollout(broker)
            assert state is not None
            assert state["reasons"] == [
                {"node": "n1", "replica": "lab.web.0", "reason": "healthcheck unhealthy"}
            ]
            for node, item in REPLICAS[1:]:
                assert broker[item_topic(node, item)] == first[item_topic(node, item)]
            # reported to GitLab after the rollout's state is published: waited for too
            assert eventually(lambda: (_deploy(service, bad) or ("",))[0] == "failed", 10), _deploy(
                service, bad
            )
            deploy = _deploy(service, bad)
            assert deploy is not None and "n1 lab.web.0: healthcheck unhealthy" in deploy[1]
            sync = json.loads(broker[T.env_sync("lab")])
            check_payload("desired-sync", sync)
            assert sync["ok"] is True and sync["rollouts"][0]["state"] == "paused"
            assert sync["last_applied"]["commit"] != bad  # valid, not applied
            # time does not resume a paused rollout
            assert not eventually(
                lambda: _digests(desired_on_broker(watch))[1] != _digests(first)[1], timeout=1.5
            )
    finally:
        service.stop()


def test_rollback_returns_the_first_replica_to_its_old_spec(
    tmp_path: Path, mosquitto: Mosquitto, remote: ConfigRemote, fleet: Fleet
) -> None:
    update = WAVES_OF_ONE + "  on_failure: rollback\n"
    remote.commit("v1", files=_files("web:1", update))
    service = _start(remote, tmp_path, mosquitto)
    try:
        with reader(mosquitto.url) as watch:
            first = desired_on_broker(watch)
            fleet.run_what_is_published(first)
            remote.commit("bad", files=_files("web:bad", update))
            service.trigger_sync("main")
            assert service.queue.wait_idle(30)
            target = _digests(desired_on_broker(watch))[0]
            fleet.report("n1", "lab.web.0", str(target), restarts=3)  # crash-looping
            assert eventually(
                lambda: (_rollout(desired_on_broker(watch)) or {}).get("state") == "rolled-back", 10
            )
            broker = desired_on_broker(watch)
            for node, item in REPLICAS:  # all back on the old spec, byte for byte
                assert broker[item_topic(node, item)] == first[item_topic(node, item)], item
            state = _rollout(broker)
            assert state is not None and "crash-looping" in state["reasons"][0]["reason"]
    finally:
        service.stop()


@pytest.mark.slow
def test_canary_waits_for_promotion_and_restart_resumes(
    tmp_path: Path, mosquitto: Mosquitto, remote: ConfigRemote, fleet: Fleet
) -> None:
    update = "  max_parallel: 2\n  canary: 1\n  min_healthy_s: 0.2\n  healthy_deadline_s: 30\n"
    remote.commit("v1", files=_files("web:1", update))
    service = _start(remote, tmp_path, mosquitto)
    try:
        with reader(mosquitto.url) as watch:
            old = _digests(desired_on_broker(watch))
            fleet.run_what_is_published(desired_on_broker(watch))
            remote.commit("v2", files=_files("web:2", update))
            service.trigger_sync("main")
            assert service.queue.wait_idle(30)
            fleet.run_what_is_published(desired_on_broker(watch))
            assert eventually(
                lambda: (_rollout(desired_on_broker(watch)) or {}).get("state") == "waiting-promotion", 10
            )
            assert _digests(desired_on_broker(watch))[1:] == old[1:]
            service.stop()
            # a new config-sync reads the rollout back: still waiting, nothing redone or jumped
            service = _start(remote, tmp_path, mosquitto)
            assert not eventually(lambda: _digests(desired_on_broker(watch))[1] != old[1], timeout=1.0)
            assert (_rollout(desired_on_broker(watch)) or {}).get("state") == "waiting-promotion"
            waiting = str((_rollout(desired_on_broker(watch)) or {}).get("commit"))
            assert service.rollouts.promote("lab", "web", waiting).is_taken
            assert eventually(lambda: _digests(desired_on_broker(watch))[1:3] != old[1:3], 10)
            state = _rollout(desired_on_broker(watch))
            assert state is not None and state["promoted"] and state["wave"] == 2
            assert _digests(desired_on_broker(watch))[3] == old[3]  # wave 3 waits for wave 2

            def complete() -> bool:  # the agents run whatever each wave publishes
                broker = desired_on_broker(watch)
                fleet.run_what_is_published(broker)
                return (_rollout(broker) or {}).get("state") == "complete"

            assert eventually(complete, 10, interval=0.2)
            assert service.rollouts.promote("lab", "web", waiting).status == 409  # nothing left to promote
    finally:
        service.stop()


@contextmanager
def serving(service: ConfigSync) -> Iterator[str]:
    port = free_port()
    server = make_server(create_app(service), "127.0.0.1", port, service.settings.http, log_level="warning")
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    wait_for(lambda: server.started or not thread.is_alive(), "uvicorn to start", 30)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(15)


def _promote_cli(url: str, token: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PHRAME_WEBHOOK_SECRET": token}
    command = [sys.executable, "-m", "phrame", "promote", "lab", "web", "--url", url]
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=60)


@pytest.mark.slow
def test_promote_over_http_and_the_cli(
    tmp_path: Path, mosquitto: Mosquitto, remote: ConfigRemote, fleet: Fleet
) -> None:
    update = "  max_parallel: 1\n  canary: 1\n  min_healthy_s: 0.2\n  healthy_deadline_s: 30\n"
    remote.commit("v1", files=_files("web:1", update))
    settings = settings_for(
        remote, tmp_path / "state", mosquitto.url, poll_s=3600, debounce_s=0, webhook_secret=SECRET
    )
    service = ConfigSync(settings, reporter=LocalReporter())
    with serving(service) as url, reader(mosquitto.url) as watch:
        try:
            assert eventually(lambda: service.queue.wait_idle(0.1) and service.syncer.last.get("main"), 30)
            old = _digests(desired_on_broker(watch))
            fleet.run_what_is_published(desired_on_broker(watch))
            refused = _promote_cli(url, SECRET)  # no rollout: no commit to name, nothing to promote
            assert (
                refused.returncode == 1 and "400" in refused.stdout and "nothing to promote" in refused.stdout
            )
            remote.commit("v2", files=_files("web:2", update))
            service.trigger_sync("main")
            fleet_waits = lambda: (  # noqa: E731
                fleet.run_what_is_published(desired_on_broker(watch)),
                (_rollout(desired_on_broker(watch)) or {}).get("state") == "waiting-promotion",
            )[1]
            assert eventually(fleet_waits, 15, interval=0.2)
            wrong = httpx.post(f"{url}/rollouts/lab/web/promote", headers={"Authorization": "Bearer nope"})
            assert wrong.status_code == 401
            tokenless = _promote_cli(url, "")  # a new user's first try: says where the token comes from
            assert tokenless.returncode == 1 and tokenless.stdout.startswith("401 ")
            assert "no token was given" in tokenless.stderr and "--token-file" in tokenless.stderr
            assert _digests(desired_on_broker(watch))[1] == old[1]
            status_before = httpx.get(f"{url}/status", headers={"Authorization": f"Bearer {SECRET}"}).json()
            promoted = _promote_cli(url, SECRET)  # reads the waiting commit from /status, names it
            assert promoted.returncode == 0, promoted.stdout + promoted.stderr
            assert promoted.stdout.startswith("202 ")
            waiting = status_before["rollouts"]["lab/web"]["commit"]
            assert f"rolls out {waiting[:12]}" in promoted.stderr and waiting in promoted.stdout
            assert eventually(lambda: _digests(desired_on_broker(watch))[1] != old[1], 10)
            assert _digests(desired_on_broker(watch))[2:] == old[2:]  # waves of one after the canary
            status = httpx.get(f"{url}/status", headers={"Authorization": f"Bearer {SECRET}"}).json()
            assert status["rollouts"]["lab/web"]["promoted"] is True
        finally:
            service.stop()


@pytest.mark.slow
def test_a_broker_restarted_without_its_retained_plane_keeps_the_waves(
    tmp_path: Path, mosquitto: Mosquitto, remote: ConfigRemote, fleet: Fleet
) -> None:
    """The broker loses every retained message mid-rollout (no persistence) while config-sync
    runs on: the replicas not released yet get their old spec back (re-rendered from the
    commit it came from, byte for byte), not the new one."""
    remote.commit("v1", files=_files("web:1", WAVES_OF_ONE))
    service = _start(remote, tmp_path, mosquitto)
    try:
        with reader(mosquitto.url) as watch:
            first = desired_on_broker(watch)
            fleet.run_what_is_published(first)
        v2 = remote.commit("v2", files=_files("web:2", WAVES_OF_ONE))
        service.trigger_sync("main")
        assert service.queue.wait_idle(30)
        mosquitto.restart()  # no persistence: the desired plane is gone
        with reader(mosquitto.url) as watch:

            def republished() -> bool:
                broker = desired_on_broker(watch)
                return all(broker.get(item_topic(n, i)) for n, i in REPLICAS) and bool(_rollout(broker))

            assert eventually(republished, 30, interval=0.2), (
                "config-sync did not republish after the restart"
            )
            broker = desired_on_broker(watch)
            for node, item in REPLICAS[1:]:
                assert broker[item_topic(node, item)] == first[item_topic(node, item)], item
            assert broker[item_topic("n1", "lab.web.0")] != first[item_topic("n1", "lab.web.0")]
            state = _rollout(broker)
            assert state is not None and (state["commit"], state["wave"], state["state"]) == (
                v2,
                1,
                "progressing",
            )
    finally:
        service.stop()
