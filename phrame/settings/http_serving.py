"""Serving an ASGI app under uvicorn with limits that a hostile client cannot outlast.

config-sync's sub-command (and every HTTP service to come) calls :func:`serve`; tests call
:func:`make_server` and run it on a thread. uvicorn bounds idle keep-alive time but neither
the time a request head may take (h11 has no header timeout) nor the number of open
connections, so half-open connections used to pile up until accept() failed for every
client. Here a connection whose request head is not complete within ``header_timeout_s``
is closed, at most ``max_connections`` are open (a new one closes the oldest waiting one),
and the file limit is raised so that cap fits. Conditions are logged once per interval
with a count (:class:`ConditionLog`, :class:`FloodFilter`), never once per connection.
"""

from __future__ import annotations

import asyncio
import logging
import resource
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from phrame.settings.env import EnvReader
from phrame.settings.logs import ConditionLog, FloodFilter

log = logging.getLogger(__name__)

FILE_RESERVE = 128  # descriptors kept for the broker, git's pipes, the state files
MIN_CONNECTIONS = 16
MAX_BACKLOG = 2048  # uvicorn's default listen backlog
MAX_HEAD_BYTES = 16 * 1024  # a request line plus headers; GitLab's are far below it
ACCEPT_FLOOD = ("socket.accept() out of system resource",)


@dataclass(frozen=True)
class HttpLimits:
    header_timeout_s: float = 10.0  # the request head (line + headers) must be complete by then
    body_timeout_s: float = 30.0  # a handler reading the body gives up after this (408)
    max_connections: int = 1000  # open connections at once, also capped by the file limit
    keep_alive_s: int = 5  # idle time between two requests of one connection

    @classmethod
    def from_env(cls, e: EnvReader) -> HttpLimits:
        return cls(
            header_timeout_s=e.number("PHRAME_HTTP_HEADER_TIMEOUT_S", 10.0, minimum=0.1),
            body_timeout_s=e.number("PHRAME_HTTP_BODY_TIMEOUT_S", 30.0, minimum=0.1),
            max_connections=e.integer("PHRAME_HTTP_MAX_CONNECTIONS", 1000, minimum=MIN_CONNECTIONS),
        )


def raise_file_limit() -> int:
    """Raise the soft RLIMIT_NOFILE to the hard one; return the soft limit now in force."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != hard:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
            soft = hard
        except (ValueError, OSError) as e:  # a container may forbid it: keep what we have
            log.warning("cannot raise the open-file limit from %d to %d: %s", soft, hard, e)
    return soft


def connection_budget(limits: HttpLimits) -> tuple[int, int]:
    """(connection cap, accept backlog) that fit the file limit with a reserve.

    asyncio accepts up to ``backlog`` connections per wake-up before the protocol sees any
    of them, so the cap closes connections only after a whole batch: cap + backlog must fit.
    """
    soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    if soft == resource.RLIM_INFINITY:
        return limits.max_connections, MAX_BACKLOG
    spare = max(2 * MIN_CONNECTIONS, soft - FILE_RESERVE)
    backlog = max(MIN_CONNECTIONS, min(MAX_BACKLOG, spare // 4))
    return max(MIN_CONNECTIONS, min(limits.max_connections, spare - backlog)), backlog


def guarded_protocol(limits: HttpLimits, cap: int, notes: ConditionLog) -> type[asyncio.Protocol]:
    """uvicorn's h11 protocol with a request-head deadline and a cap on open connections."""
    from uvicorn.protocols.http.h11_impl import H11Protocol

    # every open connection of this server, oldest first; only the event loop touches it
    open_: OrderedDict[Guarded, None] = OrderedDict()

    class Guarded(H11Protocol):
        _head_timer: asyncio.TimerHandle | None = None
        _armed_cycle: object = None

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            if len(open_) >= cap and not self._make_room():
                transport.close()
                return
            open_[self] = None
            self._arm_head_timer()

        def connection_lost(self, exc: Exception | None) -> None:
            open_.pop(self, None)
            if self._head_timer is not None:
                self._head_timer.cancel()
                self._head_timer = None
            super().connection_lost(exc)

        def on_response_complete(self) -> None:
            super().on_response_complete()
            if not self.transport.is_closing():  # the next head has the same deadline
                self._arm_head_timer()

        def _is_waiting(self) -> bool:
            """No request being handled: waiting for a (first or next) request head."""
            return self.cycle is None or self.cycle.response_complete

        def _make_room(self) -> bool:
            # the oldest connection still waiting for a head goes: a half-open flood
            # cannot keep a real client, which sends its head at once, from getting in
            victim = next((p for p in open_ if p._is_waiting()), None)
            if victim is None:
                notes.note("busy", "connection cap %d reached, every connection busy: refusing new ones", cap)
                return False
            notes.note("cap", "connection cap %d reached: closing the oldest idle connections", cap)
            del open_[victim]
            victim.transport.close()
            return True

        def _arm_head_timer(self) -> None:
            if self._head_timer is not None:
                self._head_timer.cancel()
            self._armed_cycle = self.cycle
            self._head_timer = self.loop.call_later(limits.header_timeout_s, self._head_timeout)

        def _head_timeout(self) -> None:
            self._head_timer = None
            if self._is_waiting() and self.cycle is self._armed_cycle and not self.transport.is_closing():
                notes.note(
                    "header",
                    "header timeout: closing connections whose request head did not arrive within %g s",
                    limits.header_timeout_s,
                )
                self.transport.close()

    return Guarded


def make_server(app: Any, host: str, port: int, limits: HttpLimits, *, log_level: str = "info") -> Any:
    """A ``uvicorn.Server`` for ``app`` with ``limits`` (call ``run()`` on it)."""
    import uvicorn

    cap, backlog = connection_budget(limits)
    if cap < limits.max_connections:
        log.warning("the open-file limit allows %d connections, not %d", cap, limits.max_connections)
    notes = ConditionLog(logging.getLogger("phrame.http"))
    config = uvicorn.Config(
        app,
        host=host,
        port=port,
        log_level=log_level,
        http=guarded_protocol(limits, cap, notes),
        # uvicorn answers 503 from this many connections or tasks; the protocol keeps the
        # connections at the cap, so only running requests can reach it
        limit_concurrency=cap + 1,
        timeout_keep_alive=limits.keep_alive_s,
        h11_max_incomplete_event_size=MAX_HEAD_BYTES,
        backlog=backlog,
    )
    return uvicorn.Server(config)


def serve(
    app: Any,
    host: str,
    port: int,
    limits: HttpLimits,
    *,
    log_level: str = "info",
    on_server: Callable[[Any], None] | None = None,
) -> None:
    """Run ``app`` until a signal stops it: file limit raised, accept-error floods folded.

    ``on_server`` gets the ``uvicorn.Server`` before it runs (the topic API watches its
    ``should_exit`` to end its event streams, which uvicorn's shutdown would wait on)."""
    raise_file_limit()
    logging.getLogger("asyncio").addFilter(FloodFilter(ACCEPT_FLOOD))
    server = make_server(app, host, port, limits, log_level=log_level)
    if on_server is not None:
        on_server(server)
    server.run()
