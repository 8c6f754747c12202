"""Reading a request body with a size limit and a deadline, for the HTTP handlers.

config-sync's webhook handler (and every handler to come that reads a body) calls
:func:`read_body`. A client that declares more than it sends, sends too much or hangs up
gets one of three small exceptions the handler answers (413, 408 or nothing) and logs in
one line: never a traceback, never a handler waiting forever on a socket.
"""

from __future__ import annotations

from typing import Any

import anyio
from starlette.requests import ClientDisconnect


class BodyError(Exception):
    """The body could not be read (the subclass says why)."""


class BodyTooLarge(BodyError):
    pass


class BodyTimeout(BodyError):
    pass


class ClientGone(BodyError):
    pass


async def read_body(request: Any, *, limit: int, timeout_s: float) -> bytes:
    """The whole body of a Starlette ``request``, at most ``limit`` bytes, within ``timeout_s``."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise BodyTooLarge
    body = bytearray()
    try:
        with anyio.fail_after(timeout_s):
            async for chunk in request.stream():
                body += chunk
                if len(body) > limit:
                    raise BodyTooLarge
    except TimeoutError:
        raise BodyTimeout from None
    except ClientDisconnect:
        raise ClientGone from None
    return bytes(body)
