"""Bearer tokens: only ever from the header (a URL is logged), tickets for the event stream
only, and no token or ticket in the access log however its parameter name is spelled."""

from __future__ import annotations

import logging

import pytest
from starlette.datastructures import Headers, QueryParams

from topic_api.auth import RedactTokens, refusal


class Req:
    def __init__(self, headers: dict[str, str] | None = None, query: str = "") -> None:
        self.headers = Headers(headers or {})
        self.query_params = QueryParams(query)


def test_refusals() -> None:
    assert refusal("t", Req({"Authorization": "Bearer t"}), write=True) is None
    assert refusal("t", Req({"Authorization": "bearer t"}), write=True) is None
    assert refusal("t", Req(), write=True) == "missing token: send Authorization: Bearer <PHRAME_API_TOKEN>"
    assert refusal("t", Req({"Authorization": "Bearer x"}), write=False) == "token does not match"
    assert refusal(None, Req({"Authorization": "Bearer t"}), write=True) is not None  # no token: no writes
    assert refusal(None, Req(), write=False) is None


@pytest.mark.parametrize("write", [True, False])
def test_a_token_in_the_url_is_refused_for_reads_and_writes(write: bool) -> None:
    why = refusal("t", Req(query="access_token=t"), write=write)
    assert why is not None and "URL" in why and "stream-tickets" in why


def log_line(path: str) -> str:
    record = logging.LogRecord(
        "uvicorn.access",
        logging.INFO,
        "x",
        1,
        '%s - "%s %s HTTP/%s" %d',
        ("127.0.0.1:5", "GET", path, "1.1", 200),
        None,
    )
    assert RedactTokens().filter(record)
    return record.getMessage()


@pytest.mark.parametrize(
    "name",
    [
        "access_token",
        "access%5Ftoken",
        "%61ccess_token",
        "%2561ccess_token",
        "ACCESS_TOKEN",
        "ticket",
        "t%69cket",
    ],
)
def test_the_access_log_never_shows_a_token_or_ticket(name: str) -> None:
    line = log_line(f"/api/events?x=1&{name}=s3cret&y=2")
    assert "s3cret" not in line and f"{name}=***" in line and "x=1" in line and "y=2" in line


def test_the_access_log_keeps_other_parameters() -> None:
    assert log_line("/api/topics?filter=a%2Fb&n=access_token").endswith(
        '"GET /api/topics?filter=a%2Fb&n=access_token HTTP/1.1" 200'
    )
