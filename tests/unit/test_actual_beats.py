"""A heartbeat as the liveness readers take it (phrame.actual.beats): the fields they read,
checked on the fast path as strictly as the schema's top level, and anything unusual refused
by the strict path with the schema's reason."""

from __future__ import annotations

import json

import pytest

from phrame.actual import ActualView
from phrame.actual.beats import heartbeat_fields
from phrame.mqtt import Message
from schemas import PayloadError, Topics

T = Topics()
HOST = {"cpu_percent": 3.5, "load1": 0.2, "mem_total": 8e9, "mem_used": 1e9, "disk_total": 1, "disk_used": 1}
GOOD = {"ts": 1000.5, "seq": 3, "interval_s": 5, "host": HOST, "counts": {"containers": 2}}


def payload(**change: object) -> bytes:
    return json.dumps(GOOD | change).encode()


def test_the_agent_s_heartbeat_gives_its_ts_and_interval() -> None:
    assert heartbeat_fields(payload()) == (1000.5, 5.0)
    tiny = payload(host=HOST | {"cpu_percent": 0.00001})  # written 1e-05: the strict path, still valid
    assert heartbeat_fields(tiny) == (1000.5, 5.0)


@pytest.mark.parametrize(
    "bad",
    [
        b"{not json",
        b"[]",
        json.dumps({k: v for k, v in GOOD.items() if k != "seq"}).encode(),
        json.dumps({k: v for k, v in GOOD.items() if k != "host"}).encode(),
        payload(ts="soon"),
        payload(ts=True),
        payload(ts=-1),
        payload(seq=1.5),
        payload(seq=-1),
        payload(interval_s=0),
        payload(host=[1]),
        payload().replace(b"1000.5", b"NaN"),
        payload().replace(b"1000.5", b"1e999"),
        payload().replace(b"1000.5", b"1" * 400 + b".0"),
        payload(host=HOST | {"mem_total": 1e308}).replace(b"1e+308", b"1e999"),
        payload(x="\ud800"),
        payload(x=[[[[[]]]]]).replace(b"[[[[[]]]]]", b"[" * 900 + b"]" * 900),
        b"\xff" + payload(),
    ],
)
def test_what_the_schema_or_strict_json_refuses_is_refused(bad: bytes) -> None:
    with pytest.raises(ValueError):
        heartbeat_fields(bad)


def test_a_refusal_names_the_schema_s_reason() -> None:
    with pytest.raises(PayloadError, match="seq"):
        heartbeat_fields(payload(seq=-1))


def test_host_figures_are_left_to_the_readers_that_show_them() -> None:
    """The liveness view reads ``ts`` and ``interval_s``; a host figure out of the schema
    (a negative load) does not make the node's beat go unheard there."""
    view = ActualView(T, timeout_s=20, clock=lambda: 1000.0)
    view.on_message(Message(T.heartbeat("n1"), payload(host=HOST | {"load1": -1}), False))
    assert view.verdict("n1", 1001.0).is_online
