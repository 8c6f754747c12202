"""Bearer tokens: header or (reads only) query; never a token in the access log."""

from __future__ import annotations

import logging

from starlette.datastructures import Headers, QueryParams

from topic_api.auth import RedactTokens, refusal


class Req:
    def __init__(self, headers: dict[str, str] | None = None, query: str = "") -> None:
        self.headers = Headers(headers or {})
        self.query_params = QueryParams(query)


def test_refusals() -> None:
    assert refusal("t", Req({"Authorization": "Bearer t"}), write=True) is None
    assert refusal("t", Req({"Authorization": "bearer t"}), write=True) is None
    assert (
        refusal("t", Req(query="access_token=t"), write=True)
        == "missing token: send Authorization: Bearer <PHRAME_API_TOKEN>"
    )
    assert refusal("t", Req(query="access_token=t"), write=False) is None
    assert refusal("t", Req({"Authorization": "Bearer x"}), write=False) == "token does not match"
    assert refusal(None, Req({"Authorization": "Bearer t"}), write=True) is not None  # no token: no writes
    assert refusal(None, Req(), write=False) is None


def test_the_access_log_never_shows_a_query_token() -> None:
    record = logging.LogRecord(
        "uvicorn.access",
        logging.INFO,
        "x",
        1,
        '%s - "%s %s HTTP/%s" %d',
        ("127.0.0.1:5", "GET", "/api/events?x=1&access_token=s3cret&y=2", "1.1", 200),
        None,
    )
    assert RedactTokens().filter(record)
    assert "s3cret" not in record.getMessage() and "access_token=***" in record.getMessage()
