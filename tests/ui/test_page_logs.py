"""The dashboard's Logs button in Debian's Chromium: from the node detail, by keyboard, the
page asks for the token (as Restart does), asks the topic API for the container's tail and
shows its lines, when they were read and that older ones were left out; an agent's error
shows in the detail's message area. Real mosquitto, mirrors and uvicorn; a responder on the
broker stands in for the node's agent (its side: tests/integration/test_agent_log_commands.py)."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from phrame.mqtt import Message, MqttClient, MqttSettings
from schemas import Topics, check_payload
from tests.support.browser import screenshot
from tests.support.mosquitto import Mosquitto
from tests.support.topic_api import ApiStack, fleet
from tests.ui.conftest import Opener

pytestmark = [pytest.mark.mqtt, pytest.mark.slow]  # a browser: the slow tier
T = Topics()
TOKEN = "logs-token-test-51ab"
NODE, WEB, BROKEN = "ui-logs-1", "demo.svc0.0", "demo.svc1.0"
LINES = ["GET / 200 in 3 ms", "GET /health 200 in 1 ms", "cache warmed: 120 entries"]


def answer(client: MqttClient, msg: Message) -> None:
    """The agent's part: the tail of WEB; for BROKEN, the error Docker would give."""
    doc = json.loads(msg.payload)
    item = T.parse(msg.topic).item_id or ""
    reply: dict[str, Any] = {"id": doc["id"], "node": NODE, "item": item, "at": time.time()}
    reply |= {"lines": LINES, "truncated": True} if item == WEB else {"lines": [], "truncated": False}
    if item != WEB:
        reply["error"] = f"read the logs of {item}: Docker says no such container"
    check_payload("actual-reply", reply)
    client.publish(T.reply(NODE, doc["id"]), json.dumps(reply).encode(), retain=False)


@pytest.fixture(scope="module")
def api(browser: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ApiStack]:
    broker = Mosquitto().start()
    agent = MqttClient(MqttSettings(url=broker.url, reconnect_max_s=1), "ui-logs-agent")
    agent.start(timeout=5)
    agent.publish_batch(fleet([NODE], 2).items())
    agent.subscribe(f"{T.cmd_node(NODE)}/#", lambda m: answer(agent, m))
    folder: Path = tmp_path_factory.mktemp("ui-logs-api")
    s = ApiStack(broker.url, folder, token=TOKEN, PHRAME_NODE_TIMEOUT_S="600").start()
    try:
        s.wait_json("/api/nodes", lambda d: [n["state"] for n in d["nodes"]] == ["online"], "the node online")
        yield s
    finally:
        s.stop()
        agent.stop()
        broker.stop()


def test_logs_asks_for_the_token_and_shows_the_tail(api: ApiStack, open_page: Opener) -> None:
    page, watch = open_page(f"{api.url}/#node/{NODE}")
    button = page.locator(f'#node-detail tr[data-id="{WEB}"] button.logs')
    button.wait_for()
    assert button.get_attribute("aria-label") == f"Show the current log tail of container {WEB}"
    button.focus()
    page.keyboard.press("Enter")  # keyboard, as a person without a mouse
    page.wait_for_selector("#token-dialog[open]")
    assert "log" in (page.text_content("#token-why") or "")
    page.fill("#token-input", TOKEN)
    page.keyboard.press("Enter")
    page.wait_for_selector("#log-tail:not([hidden])")
    assert page.text_content("#log-tail-text") == "\n".join(LINES)
    when = page.text_content("#log-tail-when") or ""
    assert "read at" in when and "truncated" in when, when
    assert f"Logs of {WEB} on {NODE}" == page.text_content("#log-tail-h")
    assert page.evaluate("document.activeElement.classList.contains('logs')"), "the focus left the button"
    screenshot(page, "dashboard-1280-logs", full_page=False)

    # the token is held now: no dialog; the agent's error goes to the message area
    page.locator(f'#node-detail tr[data-id="{BROKEN}"] button.logs').click()
    page.wait_for_selector("#detail-message.message-bad")
    said = page.text_content("#detail-message") or ""
    assert f"Log tail of {BROKEN} failed" in said and "no such container" in said, said
    assert not page.evaluate("document.getElementById('token-dialog').open")
    assert [m for m in watch.console if "502" not in m] == [] and not watch.errors, watch.problems()
