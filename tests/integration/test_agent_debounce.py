"""When the agent's one key runs a pass, on a fake timer: not while desired messages still
arrive (a burst makes one pass once it pauses), but always once a resync is due, and each
pass queues the key again (for the next resync; after a failed pass, in 1 s, 2 s, ...).
Docker is a port nothing listens on (every pass fails fast and says so); no broker is
started, so nothing leaves the test."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import docker
import pytest

from node_agent.docker_port import DockerPort
from node_agent.loop import Agent
from node_agent.processes import ProcessSupervisor
from node_agent.settings import AgentSettings
from phrame.mqtt import Message, MqttSettings
from schemas import Topics
from tests.support import agent_support as spec
from tests.support.services import free_port


class FakeTimer:
    def __init__(self) -> None:
        self.now = 5000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def agent(tmp_path: Path) -> Iterator[tuple[Agent, FakeTimer]]:
    nowhere = docker.DockerClient(base_url=f"tcp://127.0.0.1:{free_port()}", version="1.41")
    settings = AgentSettings(node="debounce-1", state_dir=tmp_path / "state", resync_s=30, debounce_s=0.2)
    mqtt = MqttSettings(url=f"mqtt://127.0.0.1:{free_port()}")
    timer = FakeTimer()
    supervisor = ProcessSupervisor(settings.state_dir, stop_timeout=1)
    port = DockerPort(settings.node, client=nowhere, attempts=1)
    yield (
        Agent(settings, docker=port, supervisor=supervisor, desired_mqtt=mqtt, actual_mqtt=mqtt, timer=timer),
        timer,
    )
    nowhere.close()


def step(a: Agent) -> bool:
    """What the agent's worker does once: take the key if it is due and sync it."""
    key = a.runner.queue.get(block=False)
    if key is None:
        return False
    try:
        a._sync(key)
    finally:
        a.runner.queue.done(key)
    return True


def message(a: Agent, timer: FakeTimer) -> None:
    """What a desired message does: note its time and add the key."""
    a._last_message = timer.now
    a.wake()


def test_a_burst_of_desired_messages_makes_one_pass_once_it_pauses(agent: tuple[Agent, FakeTimer]) -> None:
    a, timer = agent
    a._next_resync = timer.now + 30
    for _ in range(5):  # a message every 0.1 s: never quiet for 0.2 s
        message(a, timer)
        assert step(a)  # the key runs, sees messages arriving and waits
        timer.now += 0.1
    assert a.passes == 0
    assert not step(a)  # 0.1 s after the last message: nothing due until the pause is whole
    timer.now += 0.1
    assert step(a) and a.passes == 1  # one pass for the burst
    # it failed (no Docker): tried again after 1 s, then 2 s, not at the 30 s resync
    assert a._next_resync == pytest.approx(timer.now + 1.0, abs=0.01)
    assert not step(a)  # queued again for then, not before
    timer.now = a._next_resync
    assert step(a) and a.passes == 2
    assert a._next_resync == pytest.approx(timer.now + 2.0, abs=0.01)


def test_a_due_resync_runs_although_messages_keep_coming(agent: tuple[Agent, FakeTimer]) -> None:
    a, timer = agent
    a._next_resync = timer.now + 1.0
    for _ in range(10):
        message(a, timer)
        step(a)
        timer.now += 0.1
    assert a.passes == 0
    message(a, timer)
    assert step(a) and a.passes == 1  # at the resync, 0 s after a message


def desired_message(a: Agent, topic: str, doc: dict[str, Any]) -> None:
    """A desired message as the MQTT thread hands it to the agent."""
    a._on_desired(Message(topic, json.dumps(doc).encode(), True))


def test_a_generation_complete_with_its_manifest_runs_at_once(agent: tuple[Agent, FakeTimer]) -> None:
    """The manifest of a generation and all its items are in: the pass runs without the
    debounce; an item whose manifest is still missing waits for the pause as before."""
    a, timer = agent
    a._next_resync = timer.now + 30
    specs = [spec.container("debounce", f"s{i}", commit="c" * 40) for i in range(3)]
    topics = Topics()
    for s in specs:  # items first, as config-sync publishes them
        desired_message(a, topics.desired_item(a.node, "containers", s["name"]), s)
        assert step(a)
    assert a.passes == 0  # no manifest yet: waits for the pause
    desired_message(a, topics.manifest(a.node), spec.manifest(specs, generation=7, commit="c" * 40))
    assert step(a) and a.passes == 1  # complete: at once, 0 s after the last message
    # the same generation again (a retained copy after a reconnect) changes nothing: debounced
    desired_message(a, topics.manifest(a.node), spec.manifest(specs, generation=7, commit="c" * 40))
    step(a)
    assert a.passes == 1
    # the next generation's item alone is not complete (the manifest lists the old digest)
    changed = spec.container("debounce", "s0", commit="d" * 40, image="busybox:other")
    desired_message(a, topics.desired_item(a.node, "containers", changed["name"]), changed)
    step(a)
    assert a.passes == 1
    desired_message(
        a, topics.manifest(a.node), spec.manifest([changed, *specs[1:]], generation=8, commit="d" * 40)
    )
    assert step(a) and a.passes == 2


def stored_message(a: Agent, timer: FakeTimer, topic: str, doc: dict[str, Any]) -> None:
    """A desired message as the network thread takes it: into the store, then the key."""
    a.store.apply(topic, json.dumps(doc).encode())
    message(a, timer)


def test_an_item_ahead_of_its_manifest_waits_for_the_manifest_and_makes_one_pass(
    agent: tuple[Agent, FakeTimer],
) -> None:
    """config-sync publishes a node's items, then its manifest: a pass between them would find
    the new item against the old manifest and report "not converged" before the real status.
    With 1,000 nodes the manifests follow their items by more than the 0.2 s debounce."""
    a, timer = agent
    a._next_resync = timer.now + 30
    t = Topics()
    old, new = spec.container("prod", "edge", image="img:1"), spec.container("prod", "edge", image="img:2")
    item = t.desired_item("debounce-1", "containers", old["name"])
    stored_message(a, timer, item, old)
    stored_message(a, timer, t.manifest("debounce-1"), spec.manifest([old]))
    timer.now += 0.2
    assert step(a) and a.passes == 1  # a complete desired state: one pass after the debounce
    step(a)  # (the failed pass's retry, queued: not due yet)

    a._next_resync = timer.now + 30
    stored_message(a, timer, item, new)  # the new item, its manifest still the old one
    timer.now += 0.2
    assert step(a) and a.passes == 1, "a pass ran between the item and its manifest"
    timer.now += 1.0
    assert not step(a) and a.passes == 1  # still within the manifest wait
    stored_message(a, timer, t.manifest("debounce-1"), spec.manifest([new], generation=2))
    timer.now += 0.2
    assert step(a) and a.passes == 2  # the whole change: one pass


def test_a_manifest_that_never_comes_is_waited_for_only_so_long(agent: tuple[Agent, FakeTimer]) -> None:
    a, timer = agent
    a._next_resync = timer.now + 30
    t = Topics()
    old, new = spec.container("prod", "edge", image="img:1"), spec.container("prod", "edge", image="img:2")
    stored_message(a, timer, t.manifest("debounce-1"), spec.manifest([old]))
    stored_message(a, timer, t.desired_item("debounce-1", "containers", old["name"]), new)
    timer.now += a.settings.manifest_wait_s
    assert step(a) and a.passes == 1  # the wait is over: the pass runs, and says not converged
