"""The topic API against a real mosquitto, real ``phrame mirror`` processes and ``phrame
topic-api`` under uvicorn: wildcard filters, kv write rules, restart commands, node and
environment views from retained payloads, server-sent events, the stream cap and shutdown.
"""

from __future__ import annotations

import json
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from phrame.mqtt import Message, MqttClient, MqttSettings
from schemas import Topics, check_payload
from tests.support.mosquitto import Mosquitto
from tests.support.topic_api import ApiStack, SseReader, fleet, heartbeat
from tests.support.waiting import wait_for

pytestmark = [pytest.mark.mqtt, pytest.mark.slow]
T = Topics()
NODES = ["api-1", "api-2"]
C2 = "d" * 40


@pytest.fixture(scope="module")
def broker() -> Iterator[Mosquitto]:
    b = Mosquitto().start()
    yield b
    b.stop()


@pytest.fixture(scope="module")
def writer(broker: Mosquitto) -> Iterator[MqttClient]:
    c = MqttClient(MqttSettings(url=broker.url, reconnect_max_s=1), "api-test-writer")
    c.start(timeout=5)
    yield c
    c.stop()


@pytest.fixture(scope="module")
def stack(
    broker: Mosquitto, writer: MqttClient, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ApiStack]:
    """Two nodes: api-1 converged, api-2 with a missing item, a crashed one, an extra one."""
    messages = fleet(NODES, 3)
    del messages[T.actual_item("api-2", "containers", "demo.svc0.0")]
    crashed = {
        "state": "exited",
        "exit_code": 3,
        "digest": json.loads(messages[T.desired_item("api-2", "containers", "demo.svc1.0")])["digest"],
    }
    messages[T.actual_item("api-2", "containers", "demo.svc1.0")] = json.dumps(crashed).encode()
    messages[T.actual_item("api-2", "containers", "other.stray.0")] = json.dumps(
        {"state": "running", "digest": None}
    ).encode()
    sync = {
        "environment": "demo",
        "ref": "main",
        "ok": False,
        "commit": C2,
        "ts": time.time(),
        "errors": [
            {
                "file": "environments/demo/services/web.yaml",
                "line": 4,
                "column": 3,
                "rule": "schema",
                "message": "image is required",
            }
        ],
    }
    check_payload("desired-sync", sync)
    deploys = {
        "environment": "demo",
        "deploys": [
            {
                "commit": C2,
                "ref": "refs/heads/main",
                "author": "Ada <ada@x>",
                "message": "first",
                "published_at": 1.0,
                "state": "converged",
                "finished_at": 3.5,
                "duration_s": 2.5,
                "nodes": {"api-1": 1},
                "failed": None,
            }
        ],
    }
    messages[T.env_sync("demo")] = json.dumps(sync).encode()
    messages[T.env_service("demo", "web")] = json.dumps({"name": "web", "image": "img:1"}).encode()
    messages[f"{T.environment('demo')}/deploys"] = json.dumps(deploys).encode()
    writer.publish_batch(messages.items())
    folder = tmp_path_factory.mktemp("api")
    s = ApiStack(broker.url, folder, PHRAME_API_WRITE_PREFIXES="phrame/kv/,phrame/actual/nodes/lab/").start()
    try:
        s.wait_json(
            "/api/nodes",
            lambda d: len(d["nodes"]) == 2 and all(n["online"] for n in d["nodes"]),
            "both nodes online",
        )
        # the desired plane comes through a mirror of its own: waited for too
        s.wait_json(
            "/api/environments/demo",
            lambda d: bool(d.get("deploys")) and "web" in (d.get("services") or {}),
            "the desired plane",
        )
        s.wait_json(
            "/api/nodes",
            lambda d: all(n["generation"]["desired"] == 1 for n in d["nodes"]),
            "both nodes' desired generation",
        )
        yield s
    finally:
        s.stop()


def test_topics_filter_matches_as_mqtt(stack: ApiStack) -> None:
    def topics(flt: str) -> list[str]:
        r = stack.get("/api/topics", params={"filter": flt})
        assert r.status_code == 200, r.text
        body = r.json()
        assert body["filter"] == flt and body["count"] == len(body["topics"])
        return sorted(body["topics"])

    assert topics("phrame/actual/nodes/+/status") == [T.status("api-1"), T.status("api-2")]
    assert topics("phrame/actual/nodes/api-1/status/#") == [T.status("api-1")]  # 'a/#' matches 'a'
    everything = topics("#")
    assert T.manifest("api-1") in everything and T.heartbeat("api-2") in everything
    assert topics("phrame/+/nodes/api-1/manifest") == [T.manifest("api-1")]
    assert topics("phrame/desired/environments/demo/#") == sorted(
        [T.env_sync("demo"), T.env_service("demo", "web"), f"{T.environment('demo')}/deploys"]
    )
    assert topics("nothing/+") == []
    for bad in ("phrame/#/x", "phrame/ac+", "", "a##"):
        r = stack.get("/api/topics", params={"filter": bad})
        assert r.status_code == 400 and "filter" in r.json()["error"], (bad, r.text)


def test_nodes_view_from_retained_payloads(stack: ApiStack) -> None:
    body = stack.json("/api/nodes")
    assert all(isinstance(body["generated_at"][p], float) for p in ("desired", "actual"))  # unix seconds
    nodes = {n["node"]: n for n in body["nodes"]}
    one, two = nodes["api-1"], nodes["api-2"]
    assert one["state"] == "online" and one["converged"] is True and one["drift"] == 0
    assert one["generation"] == {"desired": 1, "applied": 1} and one["commit"]["applied"] == "c" * 40
    assert one["host"]["cpu_percent"] == 3.5 and one["counts"]["containers"] == 3
    assert one["history"] and one["history"][-1]["mem_total"] == 8e9
    assert two["drift"] == 3
    detail = stack.json("/api/nodes/api-2")
    statuses = {i["id"]: i["status"] for i in detail["items"]}
    assert statuses == {
        "demo.svc0.0": "missing",
        "demo.svc1.0": "failed",
        "demo.svc2.0": "in-sync",
        "other.stray.0": "extra",
    }
    r = stack.get("/api/nodes/nobody")
    assert r.status_code == 404 and "nobody" in r.json()["error"]


def test_environments_view(stack: ApiStack) -> None:
    envs = stack.json("/api/environments")["environments"]
    assert [e["environment"] for e in envs] == ["demo"]
    demo = stack.json("/api/environments/demo")
    assert demo["ok"] is False and demo["commit"] == C2
    assert (
        demo["errors"][0]["file"] == "environments/demo/services/web.yaml" and demo["errors"][0]["line"] == 4
    )
    assert demo["deploys"][0]["duration_s"] == 2.5 and demo["services"] == {
        "web": {"name": "web", "image": "img:1"}
    }
    assert stack.get("/api/environments/nope").status_code == 404


def test_kv_writes_need_the_token_the_prefixes_and_a_valid_payload(
    stack: ApiStack, writer: MqttClient
) -> None:
    url = "/api/kv/phrame/kv/team/colour"
    assert httpx.put(stack.url + url, content=b'"blue"').status_code == 401
    assert httpx.put(stack.url + url, content=b'"blue"', headers=stack.headers("wrong")).status_code == 401
    outside = httpx.put(
        stack.url + "/api/kv/phrame/desired/nodes/api-1/manifest", content=b"{}", headers=stack.headers()
    )
    assert outside.status_code == 403 and "outside" in outside.json()["error"]
    not_json = httpx.put(stack.url + url, content=b"blue", headers=stack.headers())
    assert not_json.status_code == 400 and "not JSON" in not_json.json()["error"]
    invalid = httpx.put(
        stack.url + "/api/kv/phrame/actual/nodes/lab/status",
        content=b'{"state": "sleepy"}',
        headers=stack.headers(),
    )
    assert invalid.status_code == 422 and "actual-status" in invalid.json()["error"]
    wildcard = httpx.put(stack.url + "/api/kv/phrame/kv/%2B", content=b"1", headers=stack.headers())
    assert wildcard.status_code == 400
    big = httpx.put(stack.url + url, content=b'"' + b"x" * 300_000 + b'"', headers=stack.headers())
    assert big.status_code == 413
    assert writer.collect_retained("phrame/kv/#", settle=0.2) == {}  # nothing refused was published

    ok = httpx.put(stack.url + url, content=b' {"rgb": [0, 0, 255]} ', headers=stack.headers())
    assert ok.status_code == 200, ok.text
    assert writer.collect_retained("phrame/kv/#", settle=0.2) == {
        "phrame/kv/team/colour": b'{"rgb":[0,0,255]}'
    }
    assert stack.json(url)["payload"] == {"rgb": [0, 0, 255]}
    valid = httpx.put(
        stack.url + "/api/kv/phrame/actual/nodes/lab/status",
        content=b'{"state": "online"}',
        headers=stack.headers(),
    )
    assert valid.status_code == 200
    stack.wait_json(
        "/api/kv/phrame/actual/nodes/lab/status",
        lambda d: d["source"] == "mirror:actual",
        "the mirror's copy",
    )
    assert httpx.delete(stack.url + url).status_code == 401
    assert httpx.delete(stack.url + url, headers=stack.headers()).status_code == 200
    assert (
        httpx.delete(
            stack.url + "/api/kv/phrame/actual/nodes/lab/status", headers=stack.headers()
        ).status_code
        == 200
    )
    assert writer.collect_retained("phrame/kv/#", settle=0.2) == {}
    wait_for(lambda: stack.get(url).status_code == 404, "the kv value gone")


def test_restart_publishes_a_command(stack: ApiStack, broker: Mosquitto) -> None:
    got: list[Message] = []
    listener = MqttClient(MqttSettings(url=broker.url), "api-test-cmd")
    listener.start(timeout=5)
    try:
        assert listener.subscribe("phrame/cmd/nodes/api-1/#", got.append)
        path = "/api/nodes/api-1/containers/demo.svc0.0/restart"
        assert httpx.post(stack.url + path).status_code == 401
        r = httpx.post(stack.url + path, headers=stack.headers())
        assert r.status_code == 202 and r.json()["topic"] == T.restart("api-1", "demo.svc0.0")
        wait_for(lambda: got, "the restart command on the broker")
        assert got[0].topic == T.restart("api-1", "demo.svc0.0") and got[0].retain is False
        command = json.loads(got[0].payload)
        check_payload("cmd-restart", command)
        assert command["id"] == r.json()["id"] and abs(command["ts"] - time.time()) < 30
        bad = httpx.post(stack.url + "/api/nodes/api-1/containers/BAD/restart", headers=stack.headers())
        assert bad.status_code == 400
        assert (
            httpx.post(
                stack.url + "/api/nodes/ghost/containers/demo.svc0.0/restart", headers=stack.headers()
            ).status_code
            == 404
        )
    finally:
        listener.stop()


def test_events_deliver_a_change(stack: ApiStack, writer: MqttClient) -> None:
    reader = SseReader(stack.url + "/api/events")
    try:
        assert reader.status == 200
        hello, _ = reader.next("hello")
        assert set(hello["generated_at"]) == {"desired", "actual"}
        topic = T.heartbeat("api-1")
        sent = time.monotonic()
        writer.publish_batch([(topic, json.dumps(heartbeat(time.time(), seq=99, cpu=42.0)).encode())])
        change, at = reader.next("change", 10, lambda d: topic in d["changed"])
        assert change["plane"] == "actual" and change["truncated"] is False and change["removed"] == []
        assert at - sent < 5.0
        node = stack.json("/api/nodes/api-1")
        assert node["host"]["cpu_percent"] == 42.0 and node["history"][-1]["cpu_percent"] == 42.0
    finally:
        reader.close()


def test_stream_cap_and_shutdown_with_open_streams(broker: Mosquitto, tmp_path: Path) -> None:
    s = ApiStack(broker.url, tmp_path, PHRAME_API_MAX_STREAMS="1").start(mirrors=False)
    try:
        first = SseReader(s.url + "/api/events")
        first.next("hello")
        r = s.get("/api/events")
        assert r.status_code == 503 and "cap" in r.json()["error"]
        proc = s.procs["api"]
        proc.send_signal(signal.SIGINT)
        first.next("end", 10)  # the server ended the stream ...
        proc.wait(10)  # ... and exited, not waiting on the client
        assert proc.returncode == 0, s.logs()
        first.close()
    finally:
        s.stop()


def test_reads_can_require_the_token(broker: Mosquitto, tmp_path: Path) -> None:
    s = ApiStack(broker.url, tmp_path, PHRAME_API_READ_TOKEN_REQUIRED="true").start(mirrors=False)
    try:
        assert s.get("/api/nodes").status_code == 401
        assert s.get("/api/nodes", headers=s.headers()).status_code == 200
        # never the token in a URL (logs and history keep URLs): a stream takes a ticket
        assert s.get("/api/nodes", params={"access_token": "test-token"}).status_code == 401
        assert s.get("/api/events", params={"access_token": "test-token"}).status_code == 401
        ticket = s.post("/api/stream-tickets").json()["ticket"]
        reader = SseReader(s.url + f"/api/events?ticket={ticket}")
        reader.next("hello")
        reader.close()
        assert s.get("/healthz").status_code == 200 and s.get("/openapi.json").status_code == 200
        assert (
            httpx.put(s.url + "/api/kv/phrame/kv/x?access_token=test-token", content=b"1").status_code == 401
        )
    finally:
        s.stop()
    log = (tmp_path / "api.log").read_text()
    assert "access_token=***" in log and "test-token" not in log  # the access log masks it
    assert "ticket=***" in log and ticket not in log


def test_docs_are_served_without_a_cdn(stack: ApiStack) -> None:
    page = stack.get("/docs")
    assert page.status_code == 200 and "/docs/static/swagger-ui-bundle.js" in page.text
    assert "http" not in page.text.replace("http-equiv", "")  # nothing fetched from elsewhere
    js = stack.get("/docs/static/swagger-ui-bundle.js")
    assert js.status_code == 200 and len(js.content) > 100_000
    spec = stack.get("/openapi.json").json()
    assert spec["openapi"].startswith("3.") and "/api/events" in spec["paths"]
    assert stack.get("/").status_code == 200 and "text/html" in stack.get("/").headers["content-type"]


def test_two_apis_on_one_broker_keep_their_own_connections(
    stack: ApiStack, broker: Mosquitto, tmp_path: Path
) -> None:
    other = ApiStack(broker.url, tmp_path).start(mirrors=False)
    try:
        wait_for(lambda: other.get("/healthz").json()["broker"], "the second API connected")
        for i in range(10):  # one client id for both would have them kick each other off
            for api in (stack, other):
                r = httpx.put(f"{api.url}/api/kv/phrame/kv/two/{i}", content=b"1", headers=api.headers())
                assert r.status_code == 200, (i, r.text)
    finally:
        other.stop()
