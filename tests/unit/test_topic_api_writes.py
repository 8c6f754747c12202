"""The write rules: prefixes, one topic, JSON, the topic's schema; the restart command."""

from __future__ import annotations

import json

import pytest

from schemas.registry import check_payload
from topic_api.errors import WriteRefused
from topic_api.writes import kv_delete, kv_payload, restart_command

KV = ("phrame/kv/",)


def status(topic: str, body: bytes, prefixes: tuple[str, ...] = KV) -> int:
    try:
        kv_payload(topic, body, prefixes=prefixes, prefix="phrame")
    except WriteRefused as e:
        assert topic[:20] in str(e) or "topic" in str(e)
        return e.status
    return 200


def test_kv_rules() -> None:
    assert status("phrame/kv/a/b", b'{"x": 1}') == 200
    assert status("phrame/kv", b"1") == 200
    assert status("phrame/kvx/a", b"1") == 403
    assert status("phrame/desired/nodes/n1/manifest", b"{}") == 403  # config-sync's plane
    assert status("phrame/kv/a", b"not json") == 400
    assert status("phrame/kv/+", b"1") == 400
    assert status("phrame/kv/#", b"1") == 400
    assert status("$SYS/x", b"1", ("$SYS",)) == 400


def test_schema_checked_where_the_topic_has_one() -> None:
    prefixes = ("phrame/desired/",)
    assert status("phrame/desired/nodes/n1/manifest", b'{"generation": "x"}', prefixes) == 422
    good = {"generation": 1, "commit": "a" * 40, "items": {}}
    assert status("phrame/desired/nodes/n1/manifest", json.dumps(good).encode(), prefixes) == 200


def test_payload_is_canonical_json() -> None:
    assert kv_payload("phrame/kv/a", b'{ "b" : [1, 2] }', prefixes=KV, prefix="phrame") == b'{"b":[1,2]}'


def test_delete_outside_prefixes_is_refused() -> None:
    kv_delete("phrame/kv/a", prefixes=KV)
    with pytest.raises(WriteRefused) as e:
        kv_delete("phrame/actual/nodes/n1/status", prefixes=KV)
    assert e.value.status == 403


def test_restart_command() -> None:
    topic, payload = restart_command(
        "phrame", "dev-1", "demo.web.0", now=5.0, by="topic-api", command_id="c1"
    )
    assert topic == "phrame/cmd/nodes/dev-1/containers/demo.web.0/restart"
    check_payload("cmd-restart", json.loads(payload))
    assert json.loads(payload) == {"id": "c1", "requested_by": "topic-api", "ts": 5.0}
    with pytest.raises(WriteRefused) as e:
        restart_command("phrame", "dev-1", "Bad Id", now=5.0, by="x", command_id="c2")
    assert e.value.status == 400


@pytest.mark.parametrize(
    ("body", "said"),
    [
        (b'"\\ud800"', "lone surrogate"),
        (b"[" * 995, "nested too deeply"),
        (b"NaN", "NaN"),
        (b"[1e999]", "too large"),
        (b'{"x": Infinity}', "Infinity"),
    ],
)
def test_bodies_json_cannot_carry_are_refused_with_400(body: bytes, said: str) -> None:
    with pytest.raises(WriteRefused, match=said) as e:
        kv_payload("phrame/kv/a", body, prefixes=KV, prefix="phrame")
    assert e.value.status == 400 and "phrame/kv/a" in str(e.value)


def test_topics_past_the_brokers_limits_are_refused_with_400() -> None:
    deep = "phrame/kv/" + "/".join(["x"] * 201)  # 203 levels: mosquitto drops the connection
    with pytest.raises(WriteRefused, match="more than 200 levels") as e:
        kv_payload(deep, b"1", prefixes=KV, prefix="phrame")
    assert e.value.status == 400
    assert status("phrame/kv/" + "/".join(["x"] * 198), b"1") == 200  # 200 levels
    with pytest.raises(WriteRefused, match="65535 bytes") as e:
        kv_payload("phrame/kv/" + "y" * 65535, b"1", prefixes=KV, prefix="phrame")
    assert e.value.status == 400
