"""The config-sync app served by real uvicorn on 127.0.0.1, driven over HTTP with httpx.

Behind it: a real bare git remote and a real mosquitto. Covers bursts, replays, bad
tokens and bad bodies, out-of-order deliveries, merge-request reviews and the endpoints.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from config_sync.app import create_app
from config_sync.reporting import LocalReporter
from config_sync.service import ConfigSync
from phrame.settings.http_serving import make_server
from schemas import Topics
from tests.support.mosquitto import Mosquitto
from tests.support.services import free_port
from tests.support.sync_support import SAMPLE, SECRET, WEBHOOKS, ConfigRemote, reader, settings_for
from tests.support.waiting import wait_for

T = Topics()


def delivery(name: str, **headers: str) -> tuple[dict[str, str], bytes]:
    doc = json.loads((WEBHOOKS / name).read_text())
    return {**doc["headers"], **headers}, json.dumps(doc["body"]).encode()


@contextmanager
def serving(service: ConfigSync) -> Iterator[str]:
    port = free_port()
    app = create_app(service)
    server = make_server(app, "127.0.0.1", port, service.settings.http, log_level="warning")
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    wait_for(lambda: server.started or not thread.is_alive(), "uvicorn to start", 30)
    assert server.started, "uvicorn did not start"
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(15)


class Running:
    def __init__(self, service: ConfigSync, url: str, remote: ConfigRemote) -> None:
        self.service, self.url, self.remote = service, url, remote
        self.http = httpx.Client(base_url=url, timeout=10)

    def post(self, name: str, **headers: str) -> httpx.Response:
        h, body = delivery(name, **headers)
        return self.http.post("/webhooks/gitlab", content=body, headers=h)

    def idle(self) -> None:
        assert self.service.queue.wait_idle(30)

    @property
    def syncs(self) -> int:
        return self.service.sync_counts.get("main", 0)


@pytest.fixture
def running(tmp_path: Path, mosquitto: Mosquitto) -> Iterator[Running]:
    remote = ConfigRemote(tmp_path)
    remote.commit("sample", copy_from=SAMPLE)
    settings = settings_for(remote, tmp_path / "state", mosquitto.url, webhook_secret=SECRET, poll_s=3600)
    service = ConfigSync(settings, reporter=LocalReporter())
    with serving(service) as url:
        r = Running(service, url, remote)
        r.idle()
        assert r.syncs == 1  # the start-up sync
        yield r
        r.http.close()


def test_burst_of_50_webhooks_causes_at_most_two_syncs(running: Running) -> None:
    def send(i: int) -> int:
        return running.post("push.json", **{"Idempotency-Key": f"burst-{i}"}).status_code

    with ThreadPoolExecutor(10) as pool:
        codes = list(pool.map(send, range(50)))
    assert codes == [202] * 50
    running.idle()
    assert 1 <= running.syncs - 1 <= 2


def test_replayed_delivery_is_ignored(running: Running) -> None:
    first = running.post("push.json")
    running.idle()
    again = running.post("push.json")
    assert (first.status_code, again.status_code) == (202, 200)
    assert again.json()["status"] == "duplicate"
    running.idle()
    assert running.syncs == 2


def test_wrong_token_is_401_and_queues_nothing(running: Running) -> None:
    for token in ("wrong", "", SECRET + "x"):
        answer = running.post("push.json", **{"X-Gitlab-Token": token, "Idempotency-Key": f"t-{token}"})
        assert answer.status_code == 401
    h, body = delivery("push.json")
    del h["X-Gitlab-Token"]
    assert running.http.post("/webhooks/gitlab", content=body, headers=h).status_code == 401
    running.idle()  # a refused delivery is answered before anything could be queued
    assert running.syncs == 1
    # the key of a refused delivery is not remembered: the real one still gets through
    assert running.post("push.json").status_code == 202


def test_bad_requests_get_4xx_and_the_service_stays_healthy(running: Running) -> None:
    base = {"X-Gitlab-Token": SECRET, "X-Gitlab-Event": "Push Hook", "Content-Type": "application/json"}
    cases: list[tuple[dict[str, str], bytes, int, str]] = [
        (base, b"{not json", 400, "not JSON"),
        (base, b"[]", 400, "JSON object"),
        (base, b"[" * 200_000, 400, "nested too deeply"),
        (base, b'{"ref": "refs/heads/main", "n": 1' + b"0" * 5000 + b"}", 400, "not JSON"),
        (base, b'{"object_kind": "push"}', 400, "'ref'"),
        ({**base, "X-Gitlab-Event": ""}, b"{}", 400, "X-Gitlab-Event"),
        ({**base, "Content-Type": "text/plain"}, b"{}", 415, "Content-Type"),
        ({**base, "Content-Type": "application/x-www-form-urlencoded"}, b"a=b", 415, "Content-Type"),
        (base, b'{"pad": "' + b"x" * (2 * 1024 * 1024) + b'"}', 413, "bytes"),
    ]
    for headers, body, code, needle in cases:
        answer = running.http.post("/webhooks/gitlab", content=body, headers=headers)
        assert answer.status_code == code, (needle, answer.text)
        assert needle in answer.json()["error"]
    assert running.http.get("/healthz").status_code == 200
    assert running.http.get("/readyz").status_code == 200
    assert running.post("push.json").status_code == 202
    running.idle()
    assert running.syncs == 2


@pytest.mark.slow
def test_out_of_order_and_stale_deliveries_end_on_the_head(running: Running, mosquitto: Mosquitto) -> None:
    a = running.remote.commit("a", files={"environments/studio-a/services/egress.yaml": None})
    b = running.remote.commit("b", files={"environments/studio-a/services/tams.yaml": None})
    # deliveries arrive newest first, then a stale one naming an unrelated sha
    for key in ("b", "a", "stale"):
        assert running.post("push.json", **{"Idempotency-Key": f"ooo-{key}"}).status_code == 202
        running.idle()
    assert a != b
    with reader(mosquitto.url) as client:
        sync = json.loads(client.collect_retained(T.env_sync("studio-a"), settle=0.2)[T.env_sync("studio-a")])
    assert sync["commit"] == b and sync["last_applied"]["commit"] == b


def test_ignored_events_answer_200(running: Running) -> None:
    for name in (
        "tag-push.json",
        "push-branch-create.json",
        "push-branch-delete.json",
    ):
        answer = running.post(name)
        assert answer.status_code == 200 and answer.json()["status"] == "ignored", name
    # a close stops the merge request's previews (none here): queued, and no sync
    answer = running.post("merge-request-close.json")
    assert answer.status_code == 202 and answer.json()["mr"] == 7
    running.idle()
    assert running.syncs == 1


def test_merge_request_open_and_update_upsert_one_plan(running: Running) -> None:
    running.remote.commit(
        "add asset-cache",
        branch="feature/x",
        files={
            "environments/studio-a/services/asset-cache.yaml": (
                "name: asset-cache\nimage: registry.studio.test/cache:1\nplacement:\n  node: core-01\n"
            )
        },
    )
    assert running.post("merge-request-open.json").status_code == 202
    running.idle()
    reporter = running.service.reporter
    assert isinstance(reporter, LocalReporter)
    note = reporter.memory.notes[7]
    assert note.startswith("<!-- phrame:plan -->")
    assert "#### core-01" in note and "| add | container | `studio-a.asset-cache.0` |" in note
    running.remote.commit(
        "bump",
        branch="feature/x",
        files={
            "environments/studio-a/services/asset-cache.yaml": (
                "name: asset-cache\nimage: registry.studio.test/cache:2\nplacement:\n  node: nowhere\n"
            )
        },
    )
    assert running.post("merge-request-update.json").status_code == 202
    running.idle()
    assert list(reporter.memory.notes) == [7]
    assert "problem(s): this commit will not be deployed" in reporter.memory.notes[7]
    assert "unknown-node" in reporter.memory.notes[7] or "nowhere" in reporter.memory.notes[7]
    statuses = [s for s in reporter.snapshot()["statuses"] if s["ref"] == "feature/x"]
    assert [s["state"] for s in statuses] == ["success", "failed"]
    assert running.syncs == 1  # a review never publishes


def test_manual_sync_status_and_metrics(running: Running) -> None:
    assert running.http.post("/sync").status_code == 401
    answer = running.http.post("/sync", headers={"Authorization": f"Bearer {SECRET}"})
    assert answer.status_code == 202 and answer.json()["refs"] == ["main"]
    running.idle()
    assert running.syncs == 2
    assert running.http.post("/sync?ref=nope", headers={"X-Gitlab-Token": SECRET}).status_code == 404
    status: dict[str, Any] = running.http.get("/status", headers={"Authorization": f"Bearer {SECRET}"}).json()
    assert status["environments"]["studio-a"]["sync"]["ok"] is True
    assert status["tracked_refs"] == ["main"]
    assert status["reports"]["statuses"][-1]["name"] == "phrame/validate"
    metrics = running.http.get("/metrics").text
    assert 'phrame_config_sync_syncs_total{ref="main",result="applied"} 2.0' in metrics
    assert "phrame_config_sync_ready 1.0" in metrics


def test_the_ready_gauge_is_read_at_scrape_time_not_set_by_is_ready(running: Running) -> None:
    """``is_ready()`` is a query with no side effect; the gauge asks it when the
    registry is rendered, whoever scrapes (nothing called ``is_ready`` here yet)."""
    assert b"phrame_config_sync_ready 1.0" in running.service.metrics.render()


def test_phrame_replay_posts_a_recorded_delivery(
    running: Running, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from phrame.cli import main as phrame_main

    event = str(WEBHOOKS / "push.json")
    url = f"{running.url}/webhooks/gitlab"
    assert phrame_main(["replay", event, "--url", url]) == 0
    assert capsys.readouterr().out.startswith("202 ")
    running.idle()
    assert phrame_main(["replay", event, "--url", url]) == 0  # the same key again: ignored
    assert '"duplicate"' in capsys.readouterr().out
    assert phrame_main(["replay", event, "--url", url, "--new-key"]) == 0
    assert phrame_main(["replay", event, "--url", url, "--token", "wrong"]) == 1
    assert capsys.readouterr().out.splitlines()[-1].startswith("401 ")
    secret_file = tmp_path / "secret"
    secret_file.write_text("wrong-from-file\n")
    monkeypatch.setenv("PHRAME_WEBHOOK_SECRET_FILE", str(secret_file))
    assert phrame_main(["replay", event, "--url", url, "--new-key"]) == 1  # the file's secret is sent
    assert capsys.readouterr().out.splitlines()[-1].startswith("401 ")
    running.idle()
    assert running.syncs == 3
    closed = f"http://127.0.0.1:{free_port()}/webhooks/gitlab"
    assert phrame_main(["replay", event, "--url", closed]) == 2


@pytest.mark.slow
def test_started_before_its_broker_it_serves_unready_then_syncs_once_the_broker_answers(
    tmp_path: Path, mosquitto: Mosquitto
) -> None:
    mosquitto.stop()
    remote = ConfigRemote(tmp_path)
    remote.commit("sample", copy_from=SAMPLE)
    settings = settings_for(remote, tmp_path / "state", mosquitto.url, webhook_secret=SECRET, poll_s=3600)
    service = ConfigSync(settings, reporter=LocalReporter())
    service.start_wait_s = 1.0
    with serving(service) as url, httpx.Client(base_url=url, timeout=10) as http:
        assert http.get("/healthz").status_code == 200
        assert http.get("/readyz").status_code == 503
        h, body = delivery("push.json")
        assert http.post("/webhooks/gitlab", content=body, headers=h).status_code == 202
        # the 202 comes after the trigger was handled: before the broker, it is held for the first sync
        assert service.started_at is None and not service.is_ready()
        assert service.sync_counts == {}, "nothing can be synced without a broker"
        mosquitto.start()
        wait_for(lambda: http.get("/readyz").status_code == 200, "/readyz 200 once the broker answers", 30)
        assert service.queue.wait_idle(30)
        assert service.sync_counts == {"main": 1}
        with reader(mosquitto.url) as client:
            sync = client.collect_retained(T.env_sync("studio-a"), settle=0.2)
        assert json.loads(next(iter(sync.values())))["ok"] is True


@pytest.mark.slow
def test_a_login_refused_after_start_up_turns_healthz_red(tmp_path: Path) -> None:
    """The broker was down at start; when it comes up and refuses our login, waiting would
    not help: /healthz says so (503), so a supervisor restarts us with the fixed secret."""
    # mosquitto started as root drops to its own user before reading the password file,
    # so it lives where that user may enter (pytest's tmp_path is private to root)
    shared = Path(tempfile.mkdtemp(prefix="phrame-passwd-"))
    shared.chmod(0o755)
    passwd = shared / "passwd"
    subprocess.run(["mosquitto_passwd", "-b", "-c", str(passwd), "someone", "else"], check=True)
    passwd.chmod(0o644)
    port = free_port()
    broker = Mosquitto(
        [f"listener {port} 127.0.0.1", "allow_anonymous false", f"password_file {passwd}"],
        port=port,
        defaults=False,
    )
    remote = ConfigRemote(tmp_path)
    remote.commit("sample", copy_from=SAMPLE)
    settings = settings_for(remote, tmp_path / "state", broker.url, webhook_secret=SECRET, poll_s=3600)
    service = ConfigSync(settings, reporter=LocalReporter())
    service.start_wait_s = 0.5
    try:
        with serving(service) as url, httpx.Client(base_url=url, timeout=10) as http:
            assert http.get("/healthz").status_code == 200  # only waiting so far
            broker.start()
            code = wait_for(
                lambda: http.get("/healthz").status_code != 200, "the refused login on /healthz", 30
            )
            answer = http.get("/healthz")
            assert code and answer.status_code == 503 and "refused" in answer.json()["error"]
            assert answer.status_code == 503 and "refused" in answer.json()["error"]
            assert http.get("/readyz").status_code == 503
    finally:
        broker.stop()
        shutil.rmtree(shared, ignore_errors=True)
