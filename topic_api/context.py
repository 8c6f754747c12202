"""Everything a route handler needs, built once per app: settings, state, hub, broker, metrics.

Built by :func:`topic_api.app.create_app`; handlers take it as their only dependency so
a test can build an app over a folder of snapshot files without a broker. Credentials:
``PHRAME_API_TOKEN`` (an implicit ``admin``) and the tokens file's scoped tokens
(``phrame.auth``); a write needs its scope (``deploy``: restart; ``admin``: kv, import) and
is audited with its holder's name, as is a log tail request (``read``, whatever
``PHRAME_API_READ_TOKEN_REQUIRED`` says).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

import anyio
from starlette.requests import Request
from starlette.responses import Response

from phrame.auth import AuditLog, TokenStore
from phrame.auth.access import Access, Legacy, check_access
from schemas import load_json
from topic_api import auth
from topic_api.events import EventHub
from topic_api.metrics import ApiMetrics
from topic_api.responses import error
from topic_api.settings import ApiSettings
from topic_api.state import ApiState
from topic_api.tickets import StreamTickets


class Publisher(Protocol):
    """The seam to the broker (``topic_api.broker.Broker``)."""

    def publish(self, topic: str, payload: bytes | None, *, retain: bool, timeout: float = ...) -> None: ...

    def value(self, topic: str) -> bytes | None: ...

    def expect_reply(self, topic: str, deliver: Callable[[bytes], None]) -> Callable[[], None]: ...


@dataclass
class ApiContext:
    settings: ApiSettings
    state: ApiState
    hub: EventHub
    metrics: ApiMetrics
    broker: Publisher | None = None
    tickets: StreamTickets = field(default_factory=StreamTickets)
    store: TokenStore | None = None  # the tokens file (PHRAME_TOKENS_FILE)
    audit: AuditLog | None = None

    def access(self, request: Request, scope: str) -> Access:
        """Who ``request``'s bearer token names and whether it has ``scope``."""
        token = self.settings.token
        legacy = [Legacy("api-token", token, frozenset({"admin"}))] if token else []
        return check_access(auth.given_token(request), scope, store=self.store, legacy=legacy)

    def _refusal(self, request: Request, decided: Access) -> Response:
        why = decided.why
        if (
            decided.status == 401
            and auth.given_token(request) is None
            and "access_token" in request.query_params
        ):
            why = auth.IN_URL
        headers = {"WWW-Authenticate": "Bearer"} if decided.status == 401 else None
        return error(decided.status, why, headers=headers)

    def refuse_read(self, request: Request) -> Response | None:
        """A 401 (403) when reads need a token and ``request`` has none (one without ``read``); else None."""
        if not self.settings.read_token_required:
            return None
        decided = self.access(request, "read")
        return None if decided.is_allowed else self._refusal(request, decided)

    def refuse_stream(self, request: Request) -> Response | None:
        """As :meth:`refuse_read`, but a valid ``?ticket=`` (used up here) also lets a stream in."""
        if not self.settings.read_token_required:
            return None
        ticket = request.query_params.get("ticket")
        if ticket is None or "authorization" in request.headers:  # the header wins
            return self.refuse_read(request)
        if self.tickets.redeem(ticket):
            return None
        why = (
            f"stream ticket unknown, used or expired (each is good once, for {self.tickets.ttl_s:g} s): "
            "POST /api/stream-tickets for a new one"
        )
        return error(401, why, headers={"WWW-Authenticate": "Bearer"})

    async def grant_write(self, request: Request, scope: str, action: str, target: str) -> Access | Response:
        """The holder allowed to write, or the 401/403 answer (a 403 is audited: its holder is known)."""
        if self.settings.token is None and self.store is None:
            self.metrics.writes.labels("unauthorized").inc()
            why = "writes are disabled: the API has no PHRAME_API_TOKEN and no PHRAME_TOKENS_FILE"
            return error(401, why, headers={"WWW-Authenticate": "Bearer"})
        decided = self.access(request, scope)
        if decided.is_allowed:
            return decided
        self.metrics.writes.labels("unauthorized").inc()
        if decided.status == 403:
            await self.record(decided, action, target, 403)
        return self._refusal(request, decided)

    async def audited(
        self, request: Request, scope: str, action: str, target: str, write: Callable[[], Awaitable[Response]]
    ) -> Response:
        """``write`` for a holder of ``scope``, its answer recorded in the audit list."""
        granted = await self.grant_write(request, scope, action, target)
        if isinstance(granted, Response):
            return granted
        answer = await write()
        await self.record(granted, action, target, answer.status_code)
        return answer

    async def record(self, decided: Access, action: str, target: str, status: int, **extra: Any) -> None:
        """Audit one write (in a worker thread: publishing waits for the broker's PUBACK)."""
        audit = self.audit
        if audit is None:
            return
        result = (
            "accepted"
            if status < 300
            else "forbidden"
            if status == 403
            else "refused"
            if status < 500
            else "failed"
        )
        await anyio.to_thread.run_sync(
            lambda: audit.record(
                who=decided.who, action=action, target=target, result=result, status=status, **extra
            )
        )

    @staticmethod
    def payload_of(raw: bytes) -> Any:
        """A retained value as the mirror shows it: parsed JSON (strictly), or the text."""
        try:
            return load_json(raw)
        except ValueError:
            return raw.decode("utf-8", "replace")
