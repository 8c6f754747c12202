"""The dashboard in Debian's Chromium against a topic API whose reads need the token
(``PHRAME_API_READ_TOKEN_REQUIRED=true``): the page asks for the token once, reads with it as
a header, follows the event stream with a one-use ticket, and never puts the token in a URL
(access logs and proxies keep URLs). Real mosquitto, mirrors and uvicorn; no Docker."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from phrame.mqtt import MqttClient, MqttSettings
from schemas import Topics
from tests.support.browser import wait_js
from tests.support.mosquitto import Mosquitto
from tests.support.topic_api import ApiStack, fleet, heartbeat
from tests.support.waiting import wait_for
from tests.ui.conftest import Opener

pytestmark = [pytest.mark.mqtt, pytest.mark.slow]  # a browser: the slow tier
T = Topics()
TOKEN = "read-token-test-9f3c"


@pytest.fixture(scope="module")
def api(browser: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ApiStack]:
    broker = Mosquitto().start()
    writer = MqttClient(MqttSettings(url=broker.url, reconnect_max_s=1), "ui-token-writer")
    writer.start(timeout=5)
    writer.publish_batch(fleet(["tok-1"], 1).items())
    folder: Path = tmp_path_factory.mktemp("ui-token-api")
    s = ApiStack(
        broker.url, folder, token=TOKEN, PHRAME_API_READ_TOKEN_REQUIRED="true", PHRAME_NODE_TIMEOUT_S="600"
    ).start()
    s.writer = writer  # type: ignore[attr-defined]
    try:
        s.wait_json("/api/nodes", lambda d: len(d["nodes"]) == 1, "the node in the API")
        yield s
    finally:
        s.stop()
        writer.stop()
        broker.stop()


def test_reads_ask_the_token_once_and_the_stream_takes_a_ticket_not_the_token(
    api: ApiStack, open_page: Opener
) -> None:
    page, watch = open_page(api.url + "/")
    urls: list[str] = []
    page.on("request", lambda r: urls.append(r.url))
    page.wait_for_selector("#token-dialog[open]")
    assert "reading too" in (page.text_content("#token-why") or "")
    page.fill("#token-input", TOKEN)
    page.keyboard.press("Enter")
    page.wait_for_selector('#nodes-body tr[data-node="tok-1"]')
    page.wait_for_selector("#live.live-live")
    # live: a heartbeat on the broker reaches the page through the ticketed stream
    beat = heartbeat(time.time(), seq=2, cpu=66.0)
    api.writer.publish(T.heartbeat("tok-1"), json.dumps(beat).encode())  # type: ignore[attr-defined]
    cpu = "document.querySelector('#nodes-body tr[data-node=\"tok-1\"] td:nth-child(4)').textContent"
    wait_js(page, f"{cpu}.startsWith('66 %')", "the new heartbeat's cpu on the page", timeout=10)
    streams = [u for u in urls if "/api/events" in u]
    # a stream opened before the page knew reads need the token carries nothing (and gets 401);
    # every other carries a ticket, and none ever carries anything else
    assert any("?ticket=" in u for u in streams), streams
    assert all("?ticket=" in u or u.endswith("/api/events") for u in streams), streams
    assert not [u for u in urls if TOKEN in u], "the token went in a URL"
    assert not page.evaluate("document.getElementById('token-dialog').open")
    # the reads before the token was given answer 401, and the first stream too: on purpose
    assert [m for m in watch.console if "401" not in m] == [] and not watch.errors, watch.problems()
    log = (Path(api.folder) / "api.log").read_text()
    assert TOKEN not in log and "ticket=***" in log, log[-2000:]


def test_a_read_sent_before_the_token_was_given_does_not_ask_for_it_again(
    api: ApiStack, browser: Any
) -> None:
    """A read that left without the token and answers 401 after the person gave it (a slow
    network, a refresh already on its way) is not a refusal of that token: the dialog stays
    closed. It reopened, asking for the token just typed."""
    held: list[Any] = []

    def hold_tokenless(route: Any) -> None:
        if "authorization" in route.request.headers or held:
            route.continue_()
        else:
            held.append(route)  # answered below, once the token is in

    page = browser.new_page()
    try:
        page.set_default_timeout(15_000)
        page.route("**/api/environments", hold_tokenless)
        page.goto(api.url + "/")
        page.wait_for_selector("#token-dialog[open]")
        page.fill("#token-input", TOKEN)
        page.keyboard.press("Enter")
        page.wait_for_selector('#nodes-body tr[data-node="tok-1"]')
        assert held, "the first environments read was not held"
        seen: list[int] = []
        page.on("response", lambda r: seen.append(r.status) if r.url.endswith("/api/environments") else None)
        with page.expect_response(lambda r: r.url.endswith("/api/environments") and r.status == 401):
            held[0].continue_()  # it goes without the token: 401
        dialog = "document.getElementById('token-dialog').open"
        # page.evaluate lets Playwright deliver the responses the listener counts
        wait_for(
            lambda: page.evaluate(dialog) or 200 in seen, "the environments read again with the token", 10
        )
        assert not page.evaluate(dialog), "asked for the token again"
    finally:
        page.close()
