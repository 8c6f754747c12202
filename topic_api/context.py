"""Everything a route handler needs, built once per app: settings, state, hub, broker, metrics.

Built by :func:`topic_api.app.create_app`; handlers take it as their only dependency so
a test can build an app over a folder of snapshot files without a broker.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from starlette.requests import Request
from starlette.responses import Response

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


@dataclass
class ApiContext:
    settings: ApiSettings
    state: ApiState
    hub: EventHub
    metrics: ApiMetrics
    broker: Publisher | None = None
    tickets: StreamTickets = field(default_factory=StreamTickets)

    def refuse_read(self, request: Request) -> Response | None:
        """A 401 when reads need the token and ``request`` lacks it; else None."""
        if not self.settings.read_token_required:
            return None
        why = auth.refusal(self.settings.token, request, write=False)
        return None if why is None else error(401, why, headers={"WWW-Authenticate": "Bearer"})

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

    def refuse_write(self, request: Request) -> Response | None:
        why = auth.refusal(self.settings.token, request, write=True)
        if why is None:
            return None
        self.metrics.writes.labels("unauthorized").inc()
        return error(401, why, headers={"WWW-Authenticate": "Bearer"})

    @staticmethod
    def payload_of(raw: bytes) -> Any:
        """A retained value as the mirror shows it: parsed JSON (strictly), or the text."""
        try:
            return load_json(raw)
        except ValueError:
            return raw.decode("utf-8", "replace")
