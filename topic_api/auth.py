"""Bearer-token checks: every write needs ``PHRAME_API_TOKEN``; reads too when configured.

Called by :mod:`topic_api.app`. A token is taken from ``Authorization: Bearer <token>``,
or, for reads only, from the ``access_token`` query parameter (RFC 6750 §2.3): the
browser's ``EventSource`` cannot send headers. Compared in constant time. Never logs a token.
"""

from __future__ import annotations

import hmac
import logging
import re
from typing import Any


def given_token(request: Any, *, allow_query: bool) -> str | None:
    auth = request.headers.get("authorization", "")
    if auth[:7].lower() == "bearer ":
        return str(auth[7:].strip())
    if allow_query:
        value = request.query_params.get("access_token")
        return str(value) if value else None
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
    given = given_token(request, allow_query=not write)
    if given is None:
        return "missing token: send Authorization: Bearer <PHRAME_API_TOKEN>"
    if not is_valid(expected, given):
        return "token does not match"
    return None


_QUERY_TOKEN = re.compile(r"(access_token=)[^&\s]*")


class RedactTokens(logging.Filter):
    """Masks ``access_token=`` in uvicorn's access log lines (installed by ``phrame topic-api``):
    a read token given in the URL must not end up in the logs."""

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.args, tuple):
            record.args = tuple(
                _QUERY_TOKEN.sub(r"\1***", a) if isinstance(a, str) and "access_token=" in a else a
                for a in record.args
            )
        return True
