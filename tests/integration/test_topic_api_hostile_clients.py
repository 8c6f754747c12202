"""The topic API under hostile clients, over real uvicorn and mosquitto: a foreign ``Host``
(DNS rebinding) is refused and every answer carries the browser security headers; one client
cannot hold every event stream; streams take a short-lived read-only ticket, never the token,
and the token is never taken from a URL."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.support.mosquitto import Mosquitto
from tests.support.topic_api import ApiStack, SseReader

pytestmark = [pytest.mark.mqtt, pytest.mark.slow]
HEADERS = {
    "content-security-policy",
    "x-frame-options",
    "x-content-type-options",
    "referrer-policy",
}


@pytest.fixture(scope="module")
def broker() -> Iterator[Mosquitto]:
    b = Mosquitto().start()
    yield b
    b.stop()


def test_a_foreign_host_is_refused_and_every_answer_has_the_security_headers(
    broker: Mosquitto, tmp_path: Path
) -> None:
    s = ApiStack(broker.url, tmp_path, PHRAME_API_ALLOWED_HOSTS="phrame.example").start(mirrors=False)
    try:
        rebound = s.get("/api/nodes", headers={"Host": f"attacker.example:{s.port}"})
        assert rebound.status_code == 421, rebound.text
        assert "attacker.example" in rebound.json()["error"]
        assert "PHRAME_API_ALLOWED_HOSTS" in rebound.json()["error"]
        for host in (f"127.0.0.1:{s.port}", f"localhost:{s.port}", "phrame.example", "[::1]:80"):
            assert s.get("/api/nodes", headers={"Host": host}).status_code == 200, host
        for path in ("/", "/api/nodes", "/static/app.js", "/docs", "/healthz", "/api/nope"):
            r = s.get(path)
            assert set(r.headers) >= HEADERS, (path, dict(r.headers))
            assert "default-src 'self'" in r.headers["content-security-policy"]
            assert r.headers["x-frame-options"] == "DENY" and r.headers["x-content-type-options"] == "nosniff"
        assert set(rebound.headers) >= HEADERS
        assert "<script>" not in s.get("/docs").text  # no inline script: the CSP allows none
    finally:
        s.stop()


def test_one_client_cannot_hold_every_event_stream(broker: Mosquitto, tmp_path: Path) -> None:
    s = ApiStack(
        broker.url, tmp_path, PHRAME_API_MAX_STREAMS="5", PHRAME_API_MAX_STREAMS_PER_CLIENT="2"
    ).start(mirrors=False)
    readers: list[SseReader] = []
    try:
        for _ in range(2):
            readers.append(SseReader(s.url + "/api/events"))
            readers[-1].next("hello")
        third = s.get("/api/events")
        assert third.status_code == 429, third.text
        assert "PHRAME_API_MAX_STREAMS_PER_CLIENT" in third.json()["error"] and "Retry-After" in third.headers
        # another client (another source address) still gets its stream
        other = httpx.Client(transport=httpx.HTTPTransport(local_address="127.0.0.2"), timeout=10)
        with other.stream("GET", s.url + "/api/events") as r:
            assert r.status_code == 200
            assert next(r.iter_lines()) == "event: hello"
        other.close()
    finally:
        for r in readers:
            r.close()
        s.stop()


def test_streams_take_a_read_only_ticket_and_never_the_token(broker: Mosquitto, tmp_path: Path) -> None:
    s = ApiStack(broker.url, tmp_path, PHRAME_API_READ_TOKEN_REQUIRED="true").start(mirrors=False)
    try:
        assert s.post("/api/stream-tickets", token=None).status_code == 401
        issued = s.post("/api/stream-tickets")
        assert issued.status_code == 201, issued.text
        ticket = issued.json()["ticket"]
        assert issued.json()["expires_in_s"] == 60 and "test-token" not in ticket
        reader = SseReader(s.url + f"/api/events?ticket={ticket}")
        reader.next("hello")
        reader.close()
        again = s.get("/api/events", params={"ticket": ticket})  # single use
        assert again.status_code == 401 and "ticket" in again.json()["error"]
        fresh = s.post("/api/stream-tickets").json()["ticket"]
        assert s.get("/api/nodes", params={"ticket": fresh}).status_code == 401  # the events route only
        # a ticket never authorises a write, in the header or the URL
        put = httpx.put(
            s.url + "/api/kv/phrame/kv/x", content=b"1", headers={"Authorization": f"Bearer {fresh}"}
        )
        assert put.status_code == 401
        assert httpx.put(s.url + f"/api/kv/phrame/kv/x?ticket={fresh}", content=b"1").status_code == 401
        # the token in a URL is refused everywhere, spelled any way
        for name in ("access_token", "access%5Ftoken", "%61ccess_token"):
            r = httpx.get(s.url + f"/api/events?{name}=test-token")
            assert r.status_code == 401, name
        assert "URL" in httpx.get(s.url + "/api/nodes?access_token=test-token").json()["error"]
        assert s.get("/api/nodes", headers=s.headers()).status_code == 200
    finally:
        s.stop()
    log = (tmp_path / "api.log").read_text()
    assert "test-token" not in log and fresh not in log and ticket not in log, log[-3000:]
