"""The dashboard in Debian's Chromium against the dev stack of ``make up`` (``phrame dev``:
real mosquitto, config-sync, placement, two agents on the Docker daemon, the mirrors and
the topic API): both nodes online, a killed container red then green without a reload,
a container the agent restarted marked with its exit code, a container's current log
tail brought by its agent, keyboard use, the phone width. Screenshots at 1280 and 375 px go to ``out/ui/``."""

from __future__ import annotations

import os
import signal
import socket
import time
from collections.abc import Iterator
from typing import Any

import docker
import pytest

from tests.support.browser import PHONE, screenshot, wait_js
from tests.support.dev_stack import DevStackProcess
from tests.support.services import require_binary
from tests.support.waiting import wait_for
from tests.ui.conftest import Opener

pytestmark = [pytest.mark.docker, pytest.mark.mqtt, pytest.mark.slow]


@pytest.fixture(scope="module")
def stack(
    docker_client: docker.DockerClient, browser: Any, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[DevStackProcess]:
    """One dev stack for the module (``browser`` first: no stack is started for nothing)."""
    require_binary("mosquitto", "mosquitto")
    s = DevStackProcess(tmp_path_factory.mktemp("ui"))
    try:
        s.wait_ready()
        s.wait(lambda: all(s.is_converged(n) for n in s.nodes), "both nodes converged on the sample", 120)
        yield s
    finally:
        s.close()


def node_row(node: str) -> str:
    return f'#nodes-body tr[data-node="{node}"]'


def web_container(client: docker.DockerClient, stack: DevStackProcess) -> Any:
    """The sample's ``web`` container of this stack (found by its labels, never by a name pattern)."""
    found = [
        c
        for c in client.containers.list(filters={"label": "io.phrame.managed=true"})
        if c.labels.get("io.phrame.node") in stack.nodes
        and c.labels.get("io.phrame.environment") == stack.environment
        and c.labels.get("io.phrame.service") == "web"
    ]
    assert len(found) == 1, f"expected one running web container of {stack.nodes}, found {found}"
    return found[0]


def hold_port(port: int, timeout: float = 3.0) -> socket.socket | None:
    """Listen on 127.0.0.1:``port`` as soon as it is free (None if it never was)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        sock = socket.socket()
        try:
            sock.bind(("127.0.0.1", port))
            sock.listen()
            return sock
        except OSError:
            sock.close()
            time.sleep(0.005)
    return None


def test_both_nodes_online_and_the_environment_synced(stack: DevStackProcess, open_page: Opener) -> None:
    page, watch = open_page(stack.api_url)
    for node in stack.nodes:
        page.wait_for_selector(f'{node_row(node)}[data-state="online"].level-ok')
        state = page.text_content(f"{node_row(node)} td:nth-child(2)") or ""
        assert "online" in state, state
    env = page.locator(f'#env-list article[data-env="{stack.environment}"]')
    env.wait_for()
    wait_js(
        page,
        "env => document.querySelector(`article[data-env='${env}']`).textContent.includes('valid')",
        "the environment shown valid",
        arg=stack.environment,
    )
    # live once the event stream's hello arrives, which the REST replies above do not wait for
    page.wait_for_selector("#live.live-live")
    assert page.locator("#live").get_attribute("class") == "live live-live"
    summary = page.text_content("#nodes-summary") or ""
    assert f"{len(stack.nodes)} nodes: {len(stack.nodes)} online" in summary, summary
    screenshot(page, "dashboard-1280")
    assert not watch.problems(), watch.problems()


def test_keyboard_tab_reaches_a_node_and_enter_opens_it(stack: DevStackProcess, open_page: Opener) -> None:
    page, watch = open_page(stack.api_url)
    page.wait_for_selector(f"{node_row(stack.nodes[0])} a.node-link")
    focused: list[str] = []
    for _ in range(40):  # the skip link, the header's links, then the first node
        page.keyboard.press("Tab")
        focused.append(page.evaluate("document.activeElement.outerHTML.slice(0, 80)"))
        if page.evaluate("document.activeElement.matches('a.node-link')"):
            break
    else:
        pytest.fail(f"Tab never reached a node link; focus went through {focused}")
    node = page.evaluate("document.activeElement.textContent")
    assert node == stack.nodes[0], focused
    # the focus is visible: :focus-visible draws an outline on the link
    outline = page.evaluate("getComputedStyle(document.activeElement).outlineStyle")
    assert outline not in ("", "none"), outline
    # heartbeats update the row every second: the focus must survive the update
    row = node_row(node)
    before = page.get_attribute(f"{row} .hb", "data-at")
    wait_js(
        page,
        "([row, before]) => document.querySelector(row + ' .hb').dataset.at !== before",
        "a new heartbeat on the row",
        arg=[row, before],
    )
    assert page.evaluate("document.activeElement.matches('a.node-link')"), "a live update took the focus away"
    page.keyboard.press("Enter")
    page.wait_for_selector("#node-dialog[open]")
    assert page.text_content("#node-dialog-h") == f"Node {node}"
    page.wait_for_selector('#node-detail section[data-kind="containers"] tbody tr[data-kind="containers"]')
    screenshot(page, "dashboard-1280-node", full_page=False)
    page.keyboard.press("Escape")
    page.wait_for_selector("#node-dialog:not([open])", state="attached")
    assert page.evaluate("document.activeElement.textContent") == node, "the focus did not return to the node"
    assert not watch.problems(), watch.problems()


def test_phone_width_does_not_scroll_sideways(stack: DevStackProcess, open_page: Opener) -> None:
    page, watch = open_page(stack.api_url, viewport=PHONE)
    for node in stack.nodes:
        page.wait_for_selector(f'{node_row(node)}[data-state="online"]')
    page.locator(f'#env-list article[data-env="{stack.environment}"]').wait_for()
    widths = page.evaluate("[document.documentElement.scrollWidth, document.documentElement.clientWidth]")
    assert widths[0] <= widths[1], f"the page scrolls sideways at 375 px: scrollWidth/clientWidth {widths}"
    screenshot(page, "dashboard-375")
    page.goto(f"{stack.api_url}#node/{stack.nodes[0]}")
    page.wait_for_selector("#node-detail tbody tr[data-kind]")
    widths = page.evaluate("[document.documentElement.scrollWidth, document.documentElement.clientWidth]")
    assert widths[0] <= widths[1], f"the node detail scrolls sideways at 375 px: {widths}"
    dialog = page.evaluate("(d => [d.scrollWidth, d.clientWidth])(document.getElementById('node-dialog'))")
    assert dialog[0] <= dialog[1], f"the node dialog scrolls sideways at 375 px: {dialog}"
    screenshot(page, "dashboard-375-node", full_page=False)
    assert not watch.problems(), watch.problems()


def test_logs_brings_a_running_containers_current_tail_from_its_agent(
    stack: DevStackProcess, docker_client: docker.DockerClient, open_page: Opener
) -> None:
    """The whole way: the page, the topic API, the broker with the generated ACL, the node's
    agent, Docker, and back. A line written to the healthy web container's output just now
    is in the tail the page shows."""
    web = web_container(docker_client, stack)
    marker = f"logs-marker-{time.time_ns()}"
    web.exec_run(["sh", "-c", f"echo {marker} > /proc/1/fd/1"])  # onto the container's own output
    wait_for(lambda: marker.encode() in web.logs(tail=5), "the marker in web's output", 10)
    node, item = web.labels["io.phrame.node"], f"{stack.environment}.web.0"
    page, watch = open_page(f"{stack.api_url}#node/{node}")
    page.locator(f'#node-detail tr[data-id="{item}"] button.logs').click()
    page.wait_for_selector("#token-dialog[open]")
    page.fill("#token-input", stack.api_token())
    page.keyboard.press("Enter")
    wait_js(
        page,
        "(m) => document.getElementById('log-tail-text').textContent.includes(m)",
        "the tail",
        arg=marker,
    )
    assert page.is_visible("#log-tail") and "read at" in (page.text_content("#log-tail-when") or "")
    screenshot(page, "dashboard-1280-node-logs", full_page=False)
    assert not watch.problems(), watch.problems()


def test_a_killed_container_the_agent_restarts_shows_its_exit_without_reload(
    stack: DevStackProcess, open_page: Opener, docker_client: docker.DockerClient
) -> None:
    """Plain ``docker kill`` of the sample's web container: the agent starts it again before
    any report leaves, so the row stays green; the node detail must still say that it was
    restarted, with Docker's exit code 137, and the nodes table must count a recent exit."""
    web = web_container(docker_client, stack)
    node = web.labels["io.phrame.node"]
    item = f"{stack.environment}.web.{web.labels['io.phrame.replica']}"
    page, watch = open_page(f"{stack.api_url}#node/{node}")
    row = f'#node-detail tr[data-kind="containers"][data-id="{item}"]'
    page.wait_for_selector(f"{row}.level-ok")
    page.evaluate("window.__sameDocument = true")  # gone if the page reloads
    before = web.attrs["State"]["FinishedAt"]  # an earlier exit's note must not pass for this one
    web.kill()
    started = time.monotonic()
    wait_for(lambda: web.reload() or web.attrs["State"]["FinishedAt"] != before, "Docker to note the kill", 5)
    killed = web.attrs["State"]["FinishedAt"]
    note = f'{row} .recent-exit[data-finished-at="{killed}"]'
    page.wait_for_selector(note, timeout=10_000)
    shown_after = time.monotonic() - started
    text = page.text_content(note) or ""
    assert "restarted" in text and "ago" in text and "exit code 137" in text, text
    assert page.get_attribute(row, "data-level") == "ok", "it runs as desired: the row stays green"
    screenshot(page, "dashboard-1280-restarted", full_page=False)
    page.keyboard.press("Escape")
    page.wait_for_selector("#node-dialog:not([open])", state="attached")
    exits = f"{node_row(node)} .recent-exits"
    page.wait_for_selector(exits)
    assert "recent exit" in (page.text_content(exits) or "")
    screenshot(page, "dashboard-1280-restarted-nodes", full_page=False)
    assert page.evaluate("window.__sameDocument === true"), "the page reloaded"
    print(f"\nthe restart shown {shown_after:.1f} s after the kill")
    assert not watch.problems(), watch.problems()


def test_a_killed_container_turns_red_then_green_without_reload(
    stack: DevStackProcess, open_page: Opener, docker_client: docker.DockerClient
) -> None:
    """``docker kill`` of the sample's web container. The agent restarts a killed container
    within half a second, before any report leaves it (the mirror's debounce would hide it
    anyway), so the test also holds the container's host port: the restart fails on it as
    on a real port conflict, the agent reports the error, and the row must turn red. Once
    the port is free, the agent's next resync starts it and the row must turn green."""
    web = web_container(docker_client, stack)
    node = web.labels["io.phrame.node"]
    item = f"{stack.environment}.web.{web.labels['io.phrame.replica']}"
    page, watch = open_page(f"{stack.api_url}#node/{node}")
    row = f'#node-detail tr[data-kind="containers"][data-id="{item}"]'
    page.wait_for_selector(f"{row}.level-ok")
    page.evaluate("window.__sameDocument = true")  # gone if the page reloads

    held = None
    try:
        for _ in range(3):  # the agent may win the race for the port: then kill it again
            web.kill()
            held = hold_port(stack.web_port)
            if held is not None:
                break
            wait_for(lambda: web.reload() or web.status == "running", "the agent to restart web", 10)
        assert held is not None, f"could not take 127.0.0.1:{stack.web_port} after killing {web.name}"
        started = time.monotonic()
        page.wait_for_selector(f"{row}.level-bad", timeout=10_000)
        red_after = time.monotonic() - started
        status = page.text_content(f"{row} td.status") or ""
        assert "not running" in status and "error" in status, status
        screenshot(page, "dashboard-1280-red", full_page=False)
    finally:
        if held is not None:
            held.close()
    released = time.monotonic()
    page.wait_for_selector(f"{row}.level-ok", timeout=20_000)  # the agent resyncs every 5 s here
    green_after = time.monotonic() - released
    status = page.text_content(f"{row} td.status") or ""
    assert "in sync" in status, status
    assert page.evaluate("window.__sameDocument === true"), "the page reloaded"
    print(f"\nred {red_after:.1f} s after the kill, green {green_after:.1f} s after the port was freed")
    assert not watch.problems(), watch.problems()


def test_a_lost_node_turns_offline_then_online_without_reload(
    stack: DevStackProcess, open_page: Opener
) -> None:
    """The agent of the second node is killed (SIGKILL: no offline status of its own); the
    row must say offline once its heartbeat is older than the timeout (3 s here), and online
    again when the supervisor has restarted the agent. Last in the module: placement moves
    that node's replica meanwhile."""
    node = stack.nodes[1]
    page, watch = open_page(stack.api_url)
    row = node_row(node)
    page.wait_for_selector(f'{row}[data-state="online"]')
    page.evaluate("window.__sameDocument = true")
    stack.hold(f"agent-{node}")  # the supervisor must not bring it back yet
    try:
        os.kill(stack.pid_of(f"agent-{node}"), signal.SIGKILL)
        page.wait_for_selector(f'{row}[data-state="offline"].level-bad', timeout=15_000)
        assert "offline" in (page.text_content(f"{row} td:nth-child(2)") or "")
        assert "offline" in (page.text_content("#nodes-summary") or "")
        screenshot(page, "dashboard-1280-offline", full_page=False)
    finally:
        stack.hold(f"agent-{node}", held=False)  # the supervisor restarts it (backoff 1 s)
    page.wait_for_selector(f'{row}[data-state="online"]', timeout=30_000)
    assert page.evaluate("window.__sameDocument === true"), "the page reloaded"
    # the killed agent's requests never reached the page; failed page requests would be ours
    assert not watch.problems(), watch.problems()
