"""The dashboard in Debian's Chromium against the real topic API (``phrame mirror`` x2 and
``phrame topic-api`` on a real mosquitto) fed with retained payloads the test writes: markup
in payloads stays text, a change on the broker reaches the page without a reload, and the
page reconnects (and catches up) when the event stream drops. No Docker needed."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import pytest

from phrame.mqtt import MqttClient, MqttSettings
from schemas import Topics, check_payload
from tests.support.browser import screenshot, wait_js
from tests.support.mosquitto import Mosquitto
from tests.support.services import wait_for_port
from tests.support.topic_api import ApiStack, fleet, heartbeat
from tests.support.waiting import wait_for
from tests.ui.conftest import Opener

pytestmark = [pytest.mark.mqtt, pytest.mark.slow]  # a browser: the slow tier
T = Topics()
NODES = ["ui-1", "ui-2"]
XSS = '<img src=x onerror="window.__xss=1">'
# the deploy records (config-sync writes them; here the test does)
DEPLOYS = {
    "environment": "demo",
    "deploys": [
        {"commit": "f" * 40, "ref": "refs/heads/main", "author": "Eve <eve@x>", "message": "Canary",
         "published_at": time.time() - 30, "state": "pending", "finished_at": None, "duration_s": None,
         "nodes": {"ui-1": 4}, "failed": None, "health": "suspended",
         "reasons": [{"node": "", "replica": "web", "reason": "staged rollout waiting-promotion"}],
         "replicas": {"demo.web.0": "ui-1"}, "waves": [], "suspended_s": 0.0, "suspended_since": time.time() - 20},
        {"commit": "e" * 40, "ref": "refs/heads/main", "author": "Ada <ada@x>", "message": "GPU job",
         "published_at": time.time() - 45, "state": "degraded", "finished_at": time.time() - 44,
         "duration_s": 1.0, "nodes": {}, "health": "degraded",
         "failed": {"node": "", "reason": "demo.gpu.0: unassigned: no node has gpu=true"},
         "reasons": [{"node": "", "replica": "demo.gpu.0", "reason": "unassigned: no node has gpu=true"}],
         "replicas": {"demo.gpu.0": None}, "waves": [], "suspended_s": 0.0, "suspended_since": None},
        {"commit": "d" * 40, "ref": "refs/heads/main", "author": "Ada <ada@x>", "message": "Broken image",
         "published_at": time.time() - 60, "state": "failed", "finished_at": time.time() - 50,
         "duration_s": 10.0, "nodes": {"ui-1": 2}, "failed": {"node": "ui-1", "reason": "pull failed"}},
        {"commit": "c" * 40, "ref": "refs/heads/main", "author": "Bob <bob@x>", "message": "First",
         "published_at": time.time() - 600, "state": "converged", "finished_at": time.time() - 597.5,
         "duration_s": 2.5, "nodes": {"ui-1": 1, "ui-2": 1}, "failed": None},
    ],
}  # fmt: skip


def status(converged: bool = True, errors: list[str] | None = None) -> bytes:
    doc = {"state": "online", "agent": "test", "generation": 1, "commit": "c" * 40,
           "converged": converged, "errors": errors or [], "ts": time.time()}  # fmt: skip
    check_payload("actual-status", doc)
    return json.dumps(doc).encode()


@pytest.fixture(scope="module")
def broker(browser: Any) -> Iterator[Mosquitto]:  # browser first: skip before starting anything
    b = Mosquitto().start()
    yield b
    b.stop()


@pytest.fixture(scope="module")
def writer(broker: Mosquitto) -> Iterator[MqttClient]:
    c = MqttClient(MqttSettings(url=broker.url, reconnect_max_s=1), "ui-test-writer")
    c.start(timeout=5)
    yield c
    c.stop()


@pytest.fixture(scope="module")
def api(
    broker: Mosquitto, writer: MqttClient, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ApiStack]:
    """ui-1 with markup in its errors and in an extra container's payload; ui-2 plain."""
    messages = fleet(NODES, 2)
    messages[T.status("ui-1")] = status(errors=[f"agent says {XSS}"])
    # topic levels are checked by the mirror (names, ids); payload strings are anyone's
    odd = {
        "state": "running",
        "digest": None,
        "image": "<b>bold</b>:1",
        "error": "<script>window.__xss=2</script>",
    }
    messages[T.actual_item("ui-1", "containers", "demo.odd.0")] = json.dumps(odd).encode()
    sync = {"environment": "demo", "ref": "main", "ok": False, "commit": "c" * 40, "ts": time.time(),
            "errors": [{"file": "environments/demo/services/<i>web</i>.yaml", "line": 7, "column": 3,
                        "rule": "schema", "message": XSS}]}  # fmt: skip
    check_payload("desired-sync", sync)
    messages[T.env_sync("demo")] = json.dumps(sync).encode()
    check_payload("desired-deploys", DEPLOYS)
    messages[f"{T.environment('demo')}/deploys"] = json.dumps(DEPLOYS).encode()
    writer.publish_batch(messages.items())
    # heartbeats are written once: a long node timeout keeps the nodes online for the module
    s = ApiStack(broker.url, tmp_path_factory.mktemp("ui-api"), PHRAME_NODE_TIMEOUT_S="600").start()
    try:
        s.wait_json("/api/nodes", lambda d: len(d["nodes"]) == 2, "both nodes in the API")
        s.wait_json("/api/environments", lambda d: len(d["environments"]) == 1, "the environment in the API")
        yield s
    finally:
        s.stop()


def test_markup_from_the_broker_is_shown_as_text(api: ApiStack, open_page: Opener) -> None:
    page, watch = open_page(api.url + "/")
    page.wait_for_selector('#nodes-body tr[data-node="ui-1"]')
    page.wait_for_selector('#env-list article[data-env="demo"]')
    assert XSS in (page.text_content('#nodes-body tr[data-node="ui-1"]') or "")
    env = page.text_content('#env-list article[data-env="demo"]') or ""
    assert "environments/demo/services/<i>web</i>.yaml:7:3" in env and XSS in env, env
    page.goto(api.url + "/#node/ui-1")
    page.wait_for_selector('#node-detail tr[data-id="demo.odd.0"]')
    row = page.text_content('#node-detail tr[data-id="demo.odd.0"]') or ""
    assert "<b>bold</b>:1" in row and "<script>window.__xss=2</script>" in row, row
    injected = page.evaluate("document.querySelectorAll('img, b, i, body script').length")
    assert injected == 0, "markup from the broker became elements"
    assert page.evaluate("window.__xss === undefined"), "a payload ran script"
    assert not watch.problems(), watch.problems()


def test_a_broker_change_reaches_the_page_without_reload(
    api: ApiStack, writer: MqttClient, open_page: Opener
) -> None:
    page, watch = open_page(api.url + "/")
    row = '#nodes-body tr[data-node="ui-2"]'
    page.wait_for_selector(f"{row}.level-ok")
    page.wait_for_selector("#live.live-live")
    page.evaluate("window.__sameDocument = true")
    sent = time.monotonic()
    writer.publish(T.status("ui-2"), status(converged=False))
    page.wait_for_selector(f"{row}.level-warn", timeout=5_000)
    took = time.monotonic() - sent
    assert "converging" in (page.text_content(f"{row} td:nth-child(7)") or "")
    writer.publish(T.heartbeat("ui-2"), json.dumps(heartbeat(time.time(), seq=2, cpu=77.0)).encode())
    wait_js(page, "document.querySelector('#nodes-body tr[data-node=\"ui-2\"] td:nth-child(4)')"
                  ".textContent.startsWith('77 %')", "cpu 77 % on ui-2", timeout=5)  # fmt: skip
    writer.publish(T.status("ui-2"), status())
    page.wait_for_selector(f"{row}.level-ok", timeout=5_000)
    assert page.evaluate("window.__sameDocument === true"), "the page reloaded"
    print(f"\nbroker → page: {took:.2f} s")
    assert not watch.problems(), watch.problems()


def test_the_page_reconnects_and_catches_up(api: ApiStack, writer: MqttClient, open_page: Opener) -> None:
    page, watch = open_page(api.url + "/")
    row = '#nodes-body tr[data-node="ui-2"]'
    page.wait_for_selector("#live.live-live")
    page.wait_for_selector(f"{row}.level-ok")
    page.evaluate("window.__sameDocument = true")
    api.procs["api"].terminate()  # the API goes away: the stream drops
    api.procs["api"].wait(10)
    page.wait_for_selector("#live.live-reconnecting", timeout=10_000)
    assert "Reconnecting" in (page.text_content("#live") or "")
    writer.publish(T.status("ui-2"), status(converged=False))  # while the page is away
    api._spawn("api", "topic-api")
    assert wait_for_port(api.port, 20), f"topic-api did not come back:\n{api.logs()}"
    # backoff 1, 2, 4, 8 s (±20 %) while it was down: back within the next step
    page.wait_for_selector("#live.live-live", timeout=20_000)
    page.wait_for_selector(f"{row}.level-warn", timeout=5_000)  # refetched on the new hello
    assert page.evaluate("window.__sameDocument === true"), "the page reloaded"
    writer.publish(T.status("ui-2"), status())
    page.wait_for_selector(f"{row}.level-ok", timeout=5_000)
    # requests refused while the API was down are expected; a script error is not
    assert not watch.errors, watch.errors


def test_the_environment_shows_its_sync_errors_and_deployments(api: ApiStack, open_page: Opener) -> None:
    page, watch = open_page(api.url + "/")
    env = '#env-list article[data-env="demo"]'
    page.wait_for_selector(f"{env}.level-bad")
    text = page.text_content(env) or ""
    assert "invalid: 1 error(s)" in text and "schema: " in text, text
    rows = page.locator(f"{env} table.deploys tbody tr")
    assert rows.count() == 4
    suspended, degraded, failed, converged = (rows.nth(i).text_content() or "" for i in range(4))
    # each record's own word and reasons, as config-sync judged them
    for part in ("pending (suspended)", "suspended: web: staged rollout waiting-promotion"):
        assert part in suspended, (part, suspended)
    for part in ("degraded", "degraded: demo.gpu.0: unassigned: no node has gpu=true", "1.0 s"):
        assert part in degraded, (part, degraded)
    assert rows.nth(1).get_attribute("class") == "level-bad"
    rows = page.locator(f"{env} table.deploys tbody tr:not([data-commit^=e]):not([data-commit^=f])")
    for part in (
        "dddddddddddd",
        "Broken image",
        "Ada <ada@x>",
        "failed",
        "10.0 s",
        "failed on ui-1: pull failed",
    ):
        assert part in failed, (part, failed)
    for part in ("cccccccccccc", "First", "Bob <bob@x>", "converged", "2.5 s", "ui-1 (generation 1)"):
        assert part in converged, (part, converged)
    assert rows.nth(0).get_attribute("class") == "level-bad"
    assert rows.nth(1).get_attribute("class") == "level-ok"
    assert not watch.problems(), watch.problems()


def test_restart_asks_for_the_token_once_and_sends_the_command(
    api: ApiStack, broker: Mosquitto, open_page: Opener
) -> None:
    heard: list[str] = []
    listener = MqttClient(MqttSettings(url=broker.url), "ui-test-cmd-listener")
    listener.start(timeout=5)
    try:
        listener.subscribe(T.restart("ui-1", "demo.svc0.0"), lambda m: heard.append(m.payload.decode()))
        page, watch = open_page(api.url + "/#node/ui-1")
        button = page.locator('#node-detail tr[data-id="demo.svc0.0"] button.restart')
        button.click()
        page.wait_for_selector("#token-dialog[open]")
        page.fill("#token-input", "not-the-token")
        page.keyboard.press("Enter")
        shown = "[document.getElementById('detail-message').textContent, document.getElementById('token-dialog').open]"
        wait_js(
            page,
            "document.getElementById('detail-message').textContent.includes('refused')",
            "refused",
            observe=shown,
        )
        assert not heard, "a refused restart reached the broker"
        button.click()  # the refused token was forgotten: asked again
        page.wait_for_selector("#token-dialog[open]")
        page.fill("#token-input", api.token or "")
        page.keyboard.press("Enter")
        wait_js(
            page,
            "document.getElementById('detail-message').textContent.includes('sent')",
            "sent",
            observe=shown,
        )
        wait_for(lambda: len(heard) == 1, "the restart command on the broker", 5)
        assert json.loads(heard[0])["requested_by"] == "topic-api"
        button.click()  # kept in sessionStorage: no second question
        wait_for(lambda: len(heard) == 2, "the second restart command on the broker", 5)
        assert not page.evaluate("document.getElementById('token-dialog').open")
        # the one 401 is the refused token, on purpose
        assert [m for m in watch.console if "401" not in m] == [] and not watch.errors, watch.problems()
    finally:
        listener.stop()


def test_a_crash_looping_containers_last_lines_reach_its_node_detail(
    api: ApiStack, writer: MqttClient, open_page: Opener
) -> None:
    """A container report that carries its last lines (the agent's ``logs``): the node
    detail shows them, folded, as text; opened, they stay open when the next report comes."""
    page, watch = open_page(api.url + "/#node/ui-2")
    row = '#node-detail tr[data-id="demo.crash.0"]'
    topic = T.actual_item("ui-2", "containers", "demo.crash.0")

    def report(lines: list[str], restarts: int) -> bytes:
        last = {"exit_code": 3, "finished_at": "2026-12-04T10:00:00Z", "restarted_by": "agent"}
        doc = {"state": "running", "digest": None, "last_exit": last, "agent_restarts": restarts,
               "logs": {"lines": lines, "truncated": False}}  # fmt: skip
        check_payload("actual-item", doc)
        return json.dumps(doc).encode()

    writer.publish(topic, report(["starting", f"boom: {XSS}"], 1))
    page.wait_for_selector(f"{row} details.logs")
    assert "Last 2 lines of its output" in (page.text_content(f"{row} details.logs summary") or "")
    page.click(f"{row} details.logs summary")
    assert page.is_visible(f"{row} details.logs pre")
    assert page.text_content(f"{row} details.logs pre") == f"starting\nboom: {XSS}"
    writer.publish(topic, report(["starting", "boom again"], 2))
    wait_js(page, f"document.querySelector('{row} details.logs pre').textContent.endsWith('boom again')",
            "the next report's lines", timeout=5)  # fmt: skip
    assert page.get_attribute(f"{row} details.logs", "open") is not None, "the refetch folded them again"
    assert page.evaluate("window.__xss === undefined")
    writer.publish(topic, b"")
    assert not watch.problems(), watch.problems()


def test_a_silent_node_shows_disconnected_apart_from_offline(
    api: ApiStack, writer: MqttClient, open_page: Opener
) -> None:
    """Its last will (the connection dropped) within the environment's disconnect grace reads
    ``disconnected`` (a warning, its own class); a clean stop reads ``offline`` (bad)."""
    placement = {"environment": "demo", "disconnect_grace_s": 3600, "ts": time.time()}
    check_payload("desired-placement", placement)
    writer.publish(T.env_placement("demo"), json.dumps(placement).encode())
    page, watch = open_page(api.url + "/")
    row = '#nodes-body tr[data-node="ui-2"]'
    page.wait_for_selector(f"{row}.level-ok")
    page.wait_for_selector("#live.live-live")
    try:
        will = {"state": "offline", "agent": "node-agent", "reason": "lost"}
        writer.publish(T.status("ui-2"), json.dumps(will).encode())
        page.wait_for_selector(f'{row}[data-presence="disconnected"].level-warn', timeout=10_000)
        assert page.query_selector(f"{row} td:nth-child(2) .badge.presence-disconnected") is not None
        assert "disconnected" in (page.text_content(f"{row} td:nth-child(2)") or "")
        assert "presumably still running" in (page.text_content(f"{row} td:nth-child(7)") or "")
        assert "1 disconnected" in (page.text_content("#nodes-summary") or "")
        screenshot(page, "dashboard-1280-disconnected", full_page=False)
        stopped = {"state": "offline", "agent": "node-agent", "reason": "stopped"}
        writer.publish(T.status("ui-2"), json.dumps(stopped).encode())
        page.wait_for_selector(f'{row}[data-presence="offline"].level-bad', timeout=10_000)
        assert page.query_selector(f"{row} td:nth-child(2) .badge.presence-offline") is not None
    finally:  # the module's other tests see ui-2 online again
        writer.publish(T.status("ui-2"), status())
        writer.publish(T.heartbeat("ui-2"), json.dumps(heartbeat(time.time(), seq=9)).encode())
    page.wait_for_selector(f'{row}[data-presence="online"].level-ok', timeout=10_000)
    assert not watch.problems(), watch.problems()
