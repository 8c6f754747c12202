"""Server-sent events of snapshot changes: one hub, a bounded queue per open stream.

The watcher publishes each change to :class:`EventHub`; each ``/api/events`` request opens
a :class:`Stream` and :func:`event_stream` writes it out as ``text/event-stream``. A slow
client never slows the others or grows memory: its queue holds ``QUEUE`` changes, past that
they are replaced by one ``truncated`` change per plane (the client refetches). At most
``max_streams`` streams are open, at most ``max_per_client`` of them from one client (peer
address), so one client cannot take every stream; :meth:`EventHub.close` ends them all
(server shutdown).
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
    def __init__(self, client: str = "") -> None:
        self.client = client
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

    def __init__(self, max_streams: int, max_per_client: int | None = None) -> None:
        self.max_streams = max_streams
        self.max_per_client = max_per_client or max_streams
        self.streams: set[Stream] = set()
        self.clients: dict[str, int] = {}  # open streams per client
        self.closed = False
        self.published = 0

    def is_client_full(self, client: str) -> bool:
        return self.clients.get(client, 0) >= self.max_per_client

    def open(self, client: str = "") -> Stream | None:
        """A new stream for ``client``, or None when at either cap or shutting down."""
        if self.closed or len(self.streams) >= self.max_streams or self.is_client_full(client):
            return None
        stream = Stream(client)
        self.streams.add(stream)
        self.clients[client] = self.clients.get(client, 0) + 1
        return stream

    def release(self, stream: Stream) -> None:
        if stream not in self.streams:
            return
        self.streams.discard(stream)
        left = self.clients.get(stream.client, 0) - 1
        if left > 0:
            self.clients[stream.client] = left
        else:
            self.clients.pop(stream.client, None)

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
