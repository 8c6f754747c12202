"""Server-sent events of snapshot changes: one hub, a bounded queue per open stream.

The watcher publishes each change to :class:`EventHub`; each ``/api/events`` request opens
a :class:`Stream` and :func:`event_stream` writes it out as ``text/event-stream``. A slow
client never slows the others or grows memory: its queue holds ``QUEUE`` changes, past that
they are replaced by one ``truncated`` change per plane (the client refetches). At most
``max_streams`` streams are open; :meth:`EventHub.close` ends them all (server shutdown).
"""

from __future__ import annotations

import asyncio
import json
from collections import deque
from collections.abc import AsyncIterator, Callable
from typing import Any

QUEUE = 64


def sse(event: str, data: Any) -> bytes:
    return f"event: {event}\ndata: {json.dumps(data, separators=(',', ':'), allow_nan=False)}\n\n".encode()


KEEPALIVE = b": keepalive\n\n"


class Stream:
    def __init__(self) -> None:
        self.pending: deque[dict[str, Any]] = deque()
        self.overflowed = False
        self.closed = False
        self._wake = asyncio.Event()

    def push(self, change: dict[str, Any]) -> None:
        if len(self.pending) >= QUEUE:
            self.pending.clear()
            self.overflowed = True
        else:
            self.pending.append(change)
        self._wake.set()

    def close(self) -> None:
        self.closed = True
        self._wake.set()

    async def next(self, timeout: float) -> list[dict[str, Any]] | None:
        """The changes queued (``[]``: none within ``timeout``), or None once closed."""
        if not self.pending and not self.overflowed and not self.closed:
            try:
                await asyncio.wait_for(self._wake.wait(), timeout)
            except TimeoutError:
                return []
        self._wake.clear()
        if self.closed:
            return None
        got = list(self.pending)
        self.pending.clear()
        return got


class EventHub:
    """Every open stream; touched only on the event loop."""

    def __init__(self, max_streams: int) -> None:
        self.max_streams = max_streams
        self.streams: set[Stream] = set()
        self.closed = False
        self.published = 0

    def open(self) -> Stream | None:
        """A new stream, or None when at the cap or shutting down."""
        if self.closed or len(self.streams) >= self.max_streams:
            return None
        stream = Stream()
        self.streams.add(stream)
        return stream

    def release(self, stream: Stream) -> None:
        self.streams.discard(stream)

    def publish(self, change: dict[str, Any]) -> None:
        self.published += 1
        for stream in self.streams:
            stream.push(change)

    def close(self) -> None:
        self.closed = True
        for stream in self.streams:
            stream.close()


async def event_stream(
    hub: EventHub,
    stream: Stream,
    *,
    hello: dict[str, Any],
    generated_at: Callable[[], dict[str, float | None]],
    keepalive_s: float,
) -> AsyncIterator[bytes]:
    """``hello``, then each change (or a truncated one per plane after an overflow)."""
    try:
        yield sse("hello", hello)
        while True:
            changes = await stream.next(keepalive_s)
            if changes is None:
                return
            if stream.overflowed:
                stream.overflowed = False
                stamps = generated_at()
                for plane, ts in stamps.items():
                    yield sse(
                        "change",
                        {"plane": plane, "generated_at": ts, "changed": [], "removed": [], "truncated": True},
                    )
                continue
            if not changes:
                yield KEEPALIVE
            for change in changes:
                yield sse("change", change)
    finally:
        hub.release(stream)
