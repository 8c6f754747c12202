"""The event hub: the stream cap, a slow client's overflow turned into truncated changes,
close ending every stream, and the SSE encoding."""

from __future__ import annotations

import asyncio
import json

from topic_api.events import KEEPALIVE, QUEUE, EventHub, event_stream


def change(i: int) -> dict:
    return {
        "plane": "actual",
        "generated_at": float(i),
        "changed": [f"t/{i}"],
        "removed": [],
        "truncated": False,
    }


def parse(chunk: bytes) -> tuple[str, dict]:
    head, data = chunk.decode().strip().split("\n")
    return head.removeprefix("event: "), json.loads(data.removeprefix("data: "))


async def run_stream(hub: EventHub, published: int, reads: int) -> list[bytes]:
    """Open a stream, read hello, publish ``published`` changes, read ``reads`` chunks, close."""
    stream = hub.open()
    assert stream is not None
    stamps = lambda: {"desired": 1.0, "actual": 2.0}  # noqa: E731
    body = event_stream(hub, stream, hello={"generated_at": {}}, generated_at=stamps, keepalive_s=0.05)
    out = [await anext(body)]
    for i in range(published):
        hub.publish(change(i))
    out += [await anext(body) for _ in range(reads)]
    hub.close()
    out += [chunk async for chunk in body]
    return out


def test_changes_in_order_then_keepalive_then_end_on_close() -> None:
    hub = EventHub(max_streams=2)
    chunks = asyncio.run(run_stream(hub, 3, 4))
    assert parse(chunks[0]) == ("hello", {"generated_at": {}})
    assert [parse(c) for c in chunks[1:4]] == [("change", change(i)) for i in range(3)]
    assert chunks[4:] == [KEEPALIVE]  # nothing more queued; then close ended the stream
    assert hub.streams == set()  # released when the stream ended


def test_a_slow_client_gets_truncated_changes_instead_of_a_growing_queue() -> None:
    hub = EventHub(max_streams=2)
    chunks = asyncio.run(run_stream(hub, QUEUE + 1, 3))
    assert [parse(c) for c in chunks[1:3]] == [
        (
            "change",
            {"plane": "desired", "generated_at": 1.0, "changed": [], "removed": [], "truncated": True},
        ),
        ("change", {"plane": "actual", "generated_at": 2.0, "changed": [], "removed": [], "truncated": True}),
    ]
    assert chunks[3:] == [KEEPALIVE]


def test_the_cap_and_closing() -> None:
    hub = EventHub(max_streams=1)
    assert hub.open() is not None
    assert hub.open() is None
    hub.close()
    assert hub.open() is None and hub.closed


def test_one_client_holds_at_most_its_share() -> None:
    hub = EventHub(max_streams=5, max_per_client=2)
    a1, a2 = hub.open("10.0.0.1"), hub.open("10.0.0.1")
    assert a1 is not None and a2 is not None
    assert hub.open("10.0.0.1") is None and hub.is_client_full("10.0.0.1")
    assert hub.open("10.0.0.2") is not None  # another client is not refused
    hub.release(a1)
    assert not hub.is_client_full("10.0.0.1") and hub.open("10.0.0.1") is not None
    assert hub.clients == {"10.0.0.1": 2, "10.0.0.2": 1}
