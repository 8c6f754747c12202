"""What every answer of the topic API owes a browser: a Host allow-list and security headers.

:class:`BrowserGuard` wraps the whole Starlette app (:func:`topic_api.app.create_app`). A
request whose ``Host`` names no allowed host is answered 421 before any route runs: a page
of another site whose name was re-pointed at this API (DNS rebinding) sends its own name,
so it reads nothing. An IP address is always accepted (it names no DNS entry to re-point),
and so is a request without a ``Host`` (no browser sends one). Every answer, refusals and
404s included, carries the headers of :data:`HEADERS`. Pure ASGI; it never reads a body.
"""

from __future__ import annotations

import ipaddress
import json
import re
from collections.abc import Iterable

from starlette.types import ASGIApp, Message, Receive, Scope, Send

#: the dashboard and /docs are same-origin files: no inline script or style, nothing from
#: elsewhere (Swagger UI's stylesheet draws its icons as data: images)
CSP = (
    "default-src 'self'; img-src 'self' data:; object-src 'none'; base-uri 'none'; "
    "form-action 'self'; frame-ancestors 'none'"
)
HEADERS: tuple[tuple[bytes, bytes], ...] = (
    (b"content-security-policy", CSP.encode()),
    (b"x-frame-options", b"DENY"),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
)
LOCAL_NAMES = ("localhost",)
ANY = "*"
_NAME = re.compile(r"^[a-z0-9_]([a-z0-9_-]{0,62})(\.[a-z0-9_]([a-z0-9_-]{0,62}))*$")


def host_names(*, listen_host: str, extra: Iterable[str]) -> frozenset[str]:
    """The names a ``Host`` may carry: ``localhost``, the listen host, and ``extra``
    (``PHRAME_API_ALLOWED_HOSTS``; ``*`` allows any)."""
    names = {*LOCAL_NAMES, *(normal(n) for n in extra)}
    if listen_host:
        names.add(normal(listen_host))
    return frozenset(names)


def normal(name: str) -> str:
    return name.strip().lower().rstrip(".")


def is_valid_name(name: str) -> bool:
    return name == ANY or bool(_NAME.match(normal(name)))


def host_allowed(host: str | None, names: frozenset[str]) -> bool:
    """Whether a ``Host`` header value (``name[:port]``, ``[v6][:port]``, an IP) may be served."""
    if host is None:
        return True
    if ANY in names:
        return True
    name = _hostname(host)
    if name is None:
        return False
    try:
        ipaddress.ip_address(name)
        return True
    except ValueError:
        return name in names


def _hostname(host: str) -> str | None:
    """The name or address of a ``Host`` value, or None when it is malformed."""
    host = host.strip()
    if host.startswith("["):
        inside, bracket, rest = host[1:].partition("]")
        if not bracket or (rest and not (rest[0] == ":" and _is_port(rest[1:]))):
            return None
        try:
            return str(ipaddress.IPv6Address(inside))
        except ValueError:
            return None
    name, colon, port = host.partition(":")
    if colon and not _is_port(port):
        return None
    name = normal(name)
    return name if _NAME.match(name) else None


def _is_port(port: str) -> bool:
    return port.isdigit() and len(port) <= 5


class BrowserGuard:
    def __init__(self, app: ASGIApp, names: frozenset[str]) -> None:
        self.app = app
        self.names = names

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        host = next((v.decode("latin-1") for k, v in scope["headers"] if k == b"host"), None)
        if not host_allowed(host, self.names):
            await _refuse(host or "", send)
            return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", ()), *HEADERS]
            await send(message)

        await self.app(scope, receive, send_with_headers)


async def _refuse(host: str, send: Send) -> None:
    message = (
        f"Host {host[:200]!r} is not a name this API answers to: open it by its listen address, "
        "localhost or an IP address, or add the name to PHRAME_API_ALLOWED_HOSTS"
    )
    body = json.dumps({"error": message}, ensure_ascii=True).encode("ascii")
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
        *HEADERS,
    ]
    await send({"type": "http.response.start", "status": 421, "headers": headers})
    await send({"type": "http.response.body", "body": body})
