"""What a route handler says about itself for ``/openapi.json``: ``@operation(...)``.

Each handler the app routes to carries one :class:`Operation` (summary, who may call it, its
answers by status with their models, query parameters, request body);
:mod:`topic_api.openapi.document` reads them off the Starlette routes, with the path and
its parameters taken from the route itself. Data only: it never changes what a handler does.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar

Access = Literal["read", "write", "public"]
F = TypeVar("F", bound=Callable[..., Any])

#: why each error status is answered, unless an operation words it itself
ERRORS = {
    400: "bad input (the message says what and where)",
    401: "missing or wrong bearer token (or stream ticket)",
    403: "the token's scope does not allow it, or the topic is outside the writable prefixes",
    404: "not found",
    408: "body not complete in time",
    409: "the import's branch exists, the tracked ref is no branch, or config-sync refused",
    413: "body too large",
    422: "payload invalid under the topic's schema",
    429: "too many event streams or stream tickets from this client",
    503: "broker unavailable, or the stream cap reached",
}
#: the path parameters of the routes, by name: (description, example)
PATH_PARAMS = {
    "node": ("node name", "dev-1"),
    "id": ("item id <env>.<service>.<replica>", "demo.web.0"),
    "env": ("environment name", "demo"),
    "service": ("service name", "web"),
    "topic": ("a topic (slashes included), no wildcards", "phrame/kv/example"),
}


@dataclass(frozen=True)
class Json:
    """A JSON answer shaped by ``model`` (a TypedDict of :mod:`topic_api.models`)."""

    description: str
    model: type


@dataclass(frozen=True)
class Body:
    """A non-JSON answer or request body: ``schema`` per content type."""

    description: str
    content: dict[str, dict[str, Any]]


@dataclass(frozen=True)
class Query:
    name: str
    description: str
    required: bool = False
    default: str | None = None


@dataclass(frozen=True)
class Operation:
    summary: str
    ok: Json | Body
    access: Access = "read"
    status: int = 200  # of ``ok``
    errors: tuple[int, ...] = ()  # worded by ERRORS
    answers: dict[int, Json | Body] = field(default_factory=dict)  # more, or worded otherwise
    query: tuple[Query, ...] = ()
    body: Body | None = None
    body_required: bool = True


def operation(summary: str, ok: Json | Body, **more: Any) -> Callable[[F], F]:
    """Attach an :class:`Operation` to a route handler (read back by the document)."""
    op = Operation(summary, ok, **more)

    def attach(handler: F) -> F:
        handler.__dict__["openapi_operation"] = op
        return handler

    return attach


def operation_of(handler: Any) -> Operation | None:
    found = getattr(handler, "openapi_operation", None)
    return found if isinstance(found, Operation) else None


TEXT = {"schema": {"type": "string"}}
HTML_PAGE = Body("page", {"text/html": TEXT})
