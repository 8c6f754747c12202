"""The topic API against hostile input over real mosquitto, real mirrors and real uvicorn.

Node reports no JSON reader should take (NaN, Infinity, arrays nested near the parser's
limit) reach only their sender's row, with the reason; kv writes the broker would refuse
(too many topic levels, a packet over its limit) or JSON cannot carry answer 4xx or 503 and
leave later writes working; ``/readyz`` follows the broker connection.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from phrame.mqtt import MqttClient, MqttSettings
from schemas import Topics
from tests.support.mosquitto import Mosquitto
from tests.support.topic_api import ApiStack, fleet
from tests.support.waiting import wait_for

pytestmark = [pytest.mark.mqtt, pytest.mark.slow]
T = Topics()
GOOD = ["calm-1", "calm-2"]


def connected(s: ApiStack) -> bool:
    r = s.get("/healthz")
    return r.status_code == 200 and r.json()["broker"] is True


def strict(text: str) -> Any:
    """The answer parsed as JSON proper: NaN or Infinity in it is a failure."""

    def refuse(name: str) -> None:
        raise AssertionError(f"the answer is not JSON: it holds {name}: {text[:300]}")

    return json.loads(text, parse_constant=refuse)


@pytest.fixture(scope="module")
def broker() -> Iterator[Mosquitto]:
    b = Mosquitto().start()
    yield b
    b.stop()


@pytest.fixture(scope="module")
def writer(broker: Mosquitto) -> Iterator[MqttClient]:
    c = MqttClient(MqttSettings(url=broker.url, reconnect_max_s=1), "hostile-test-writer")
    c.start(timeout=5)
    yield c
    c.stop()


@pytest.fixture(scope="module")
def stack(broker: Mosquitto, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ApiStack]:
    s = ApiStack(broker.url, tmp_path_factory.mktemp("hostile")).start()
    try:
        wait_for(lambda: connected(s), "the API's broker connection", 15)
        yield s
    finally:
        s.stop()


def test_bad_reports_affect_only_their_senders_rows(stack: ApiStack, writer: MqttClient) -> None:
    messages = fleet(GOOD, 1)
    heartbeat = json.loads(messages[T.heartbeat("calm-1")])
    nan = json.dumps(heartbeat).replace('"cpu_percent": 3.5', '"cpu_percent": NaN')
    assert "NaN" in nan
    messages[T.heartbeat("nan-1")] = nan.encode()
    messages[T.heartbeat("inf-1")] = json.dumps(heartbeat).replace("8000000000.0", "1e999").encode()
    messages[T.heartbeat("deep-1")] = b"[" * 982 + b"]" * 982
    messages[T.status("deep-2")] = b"[" * 975 + b"]" * 975
    writer.publish_batch(messages.items())

    def settled() -> Any:
        r = stack.get("/api/nodes", headers=stack.headers())
        if r.status_code != 200:
            return None
        nodes = {n["node"]: n for n in strict(r.text)["nodes"]}
        good = all(nodes.get(n, {}).get("online") for n in GOOD)
        return nodes if good and {"nan-1", "inf-1", "deep-1", "deep-2"} <= set(nodes) else None

    nodes = wait_for(settled, "the calm nodes online and the bad ones listed", 20, observe=stack.logs)
    for name, topic in [
        ("nan-1", T.heartbeat("nan-1")),
        ("inf-1", T.heartbeat("inf-1")),
        ("deep-1", T.heartbeat("deep-1")),
        ("deep-2", T.status("deep-2")),
    ]:
        row = nodes[name]
        assert not row["online"], row
        assert any(topic in e and "invalid report" in e for e in row["errors"]), row
        assert "invalid report" in row["reason"], row
    for name in GOOD:
        assert nodes[name]["errors"] == [] and nodes[name]["host"]["cpu_percent"] == 3.5
    detail = stack.get("/api/nodes/nan-1", headers=stack.headers())
    assert detail.status_code == 200 and "NaN" in strict(detail.text)["errors"][0]

    topics = stack.get("/api/topics", headers=stack.headers())
    assert topics.status_code == 200, topics.text[:300]
    listed = strict(topics.text)["topics"]
    assert T.heartbeat("calm-1") in listed and T.heartbeat("nan-1") not in listed

    # the sender sends a good report again: its row is whole again
    writer.publish_batch([(T.heartbeat("nan-1"), messages[T.heartbeat("calm-1")])])
    stack.wait_json(
        "/api/nodes/nan-1", lambda d: d["online"] and not d["errors"], "nan-1 online after a good report"
    )


@pytest.mark.parametrize(
    ("body", "said"),
    [
        (b'"\\ud800"', "lone surrogate"),
        (b"[" * 995, "nested too deeply"),
        (b"NaN", "NaN"),
        (b"[1e999]", "too large"),
    ],
)
def test_kv_bodies_json_cannot_carry_answer_400(
    stack: ApiStack, writer: MqttClient, body: bytes, said: str
) -> None:
    url = "/api/kv/phrame/kv/hostile/body"
    r = httpx.put(stack.url + url, content=body, headers=stack.headers(), timeout=10)
    assert r.status_code == 400 and said in r.json()["error"], r.text
    assert writer.collect_retained("phrame/kv/hostile/#", settle=0.2) == {}
    assert stack.get(url, headers=stack.headers()).status_code == 404


def test_a_topic_past_the_brokers_level_limit_is_refused_and_later_writes_work(
    stack: ApiStack, writer: MqttClient
) -> None:
    deep = "/api/kv/phrame/kv/" + "/".join(["x"] * 201)  # 203 levels
    r = httpx.put(stack.url + deep, content=b"1", headers=stack.headers(), timeout=10)
    assert r.status_code == 400 and "200 levels" in r.json()["error"], r.text
    # found by fuzzing: mosquitto takes a control character in a topic for a malformed packet
    control = httpx.put(
        stack.url + "/api/kv/phrame/kv/a%1F", content=b"1", headers=stack.headers(), timeout=10
    )
    assert control.status_code == 400 and "U+001F" in control.json()["error"], control.text
    ok = httpx.put(
        stack.url + "/api/kv/phrame/kv/after/deep", content=b"2", headers=stack.headers(), timeout=10
    )
    assert ok.status_code == 200, ok.text
    assert connected(stack)


def test_a_message_the_broker_refuses_is_not_kept_for_retry(tmp_path: Path) -> None:
    """The broker drops the connection over a packet past its limit: the write answers 503,
    and it is not sent again on reconnect (which would drop every connection after)."""
    broker = Mosquitto(["max_packet_size 4000"]).start()
    s = ApiStack(broker.url, tmp_path).start(mirrors=False)
    try:
        wait_for(lambda: connected(s), "the API's broker connection", 15)
        url = s.url + "/api/kv/phrame/kv/big"
        big = httpx.put(url, content=b'"' + b"x" * 8000 + b'"', headers=s.headers(), timeout=30)
        assert big.status_code == 503, big.text
        wait_for(lambda: connected(s), "the API connected again", 15, observe=s.logs)

        def small_write() -> bool:
            r = httpx.put(url, content=b'"small"', headers=s.headers(), timeout=30)
            return r.status_code == 200

        wait_for(small_write, "a small write answered 200", 20, interval=0.5, observe=s.logs)
        assert s.get("/api/kv/phrame/kv/big", headers=s.headers()).json()["payload"] == "small"
    finally:
        s.stop()
        broker.stop()


def test_readyz_fails_with_the_reason_while_the_broker_is_away(tmp_path: Path) -> None:
    broker = Mosquitto().start()
    s = ApiStack(broker.url, tmp_path).start(mirrors=False)
    try:
        wait_for(lambda: s.get("/readyz").status_code == 200, "ready with the broker", 15)
        assert s.get("/healthz").status_code == 200
        broker.stop()

        def not_ready() -> Any:
            r = s.get("/readyz")
            return r if r.status_code == 503 else None

        r = wait_for(not_ready, "/readyz 503 with the broker away", 15)
        assert "broker" in r.json()["error"] and r.json()["broker"] is False, r.text
        assert s.get("/healthz").status_code == 200  # liveness: a restart would not help
        broker.start()
        wait_for(lambda: s.get("/readyz").status_code == 200, "ready again", 20, observe=s.logs)
    finally:
        s.stop()
        broker.stop()
