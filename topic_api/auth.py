"""Bearer tokens: taken from the header only; the legacy single-token check; log masking.

:mod:`topic_api.context` reads the token with :func:`given_token` and decides through
``phrame.auth`` (the tokens file's scopes, ``PHRAME_API_TOKEN`` as an implicit admin);
:func:`refusal` is the single-token rule alone. The token is taken from ``Authorization: Bearer
<token>`` only, never from a URL (access logs, proxies and browser history keep URLs): a
request with ``?access_token=`` is refused, saying so. A browser's ``EventSource``, which
cannot send headers, takes a stream ticket instead (:mod:`topic_api.tickets`). Compared in
constant time. Never logs a token; :class:`RedactTokens` masks one, or a ticket, in the access
log.
"""

from __future__ import annotations

import hmac
import logging
import re
from typing import Any
from urllib.parse import unquote_plus

#: query parameters the access log masks, matched on their decoded, lower-cased names
SECRET_PARAMS = frozenset({"access_token", "ticket", "token"})
IN_URL = (
    "the token is never taken from the URL (access logs keep URLs): send Authorization: Bearer "
    "<PHRAME_API_TOKEN>; an EventSource takes a ticket from POST /api/stream-tickets instead"
)


def given_token(request: Any) -> str | None:
    auth = request.headers.get("authorization", "")
    if auth[:7].lower() == "bearer ":
        return str(auth[7:].strip())
    return None


def is_valid(expected: str | None, given: str | None) -> bool:
    if expected is None or given is None:
        return False
    return hmac.compare_digest(
        expected.encode("utf-8", "surrogatepass"), given.encode("utf-8", "surrogatepass")
    )


def refusal(expected: str | None, request: Any, *, write: bool) -> str | None:
    """Why ``request`` is refused (the 401 message), or None when allowed."""
    if expected is None:
        return "writes are disabled: the API has no PHRAME_API_TOKEN" if write else None
    given = given_token(request)
    if given is None:
        if "access_token" in request.query_params:
            return IN_URL
        return "missing token: send Authorization: Bearer <PHRAME_API_TOKEN>"
    if not is_valid(expected, given):
        return "token does not match"
    return None


def masked_query(target: str) -> str:
    """``target`` (a path with its query) with the value of every secret parameter masked;
    a name counts however it is percent-encoded (``access%5Ftoken``, ``%61ccess_token``)."""
    path, q, query = target.partition("?")
    if not q:
        return target
    parts = []
    for part in re.split(r"([&;])", query):
        name, eq, _value = part.partition("=")
        parts.append(f"{name}=***" if eq and _decoded(name) in SECRET_PARAMS else part)
    return f"{path}?{''.join(parts)}"


def _decoded(name: str) -> str:
    for _ in range(5):  # %2561 is %61 is a: decode until nothing changes
        plain = unquote_plus(name)
        if plain == name:
            break
        name = plain
    return name.strip().lower()


class RedactTokens(logging.Filter):
    """Masks tokens and stream tickets in uvicorn's access log lines (installed by
    ``phrame topic-api``): a secret a client put in a URL must not end up in the logs."""

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.args, tuple):
            args = record.args
            record.args = tuple(masked_query(a) if isinstance(a, str) and "?" in a else a for a in args)
        return True
