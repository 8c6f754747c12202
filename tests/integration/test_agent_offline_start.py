"""An agent that starts with no broker converges to its saved desired state.

Real mosquitto and dockerd, ``phrame node-agent`` as a subprocess: a run that converged
saved its desired state; the agent and the broker stop and the node's containers are
removed (a reboot); started again with the broker down, the agent brings them back from
the saved file, and reports once the broker returns. A damaged file is refused.
"""

from __future__ import annotations

import os
import stat
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from schemas import Topics
from tests.support import agent_support as spec
from tests.support.agent_support import ActualWatcher, AgentEnv, AgentProcess
from tests.support.waiting import wait_for

T = Topics()


@pytest.fixture
def agents(env: AgentEnv, mosquitto, tmp_path: Path) -> Iterator[list[AgentProcess]]:
    started: list[AgentProcess] = []
    yield started
    for proc in started:
        proc.terminate()


def start_agent(env: AgentEnv, mosquitto, tmp_path: Path, agents: list[AgentProcess], n: int) -> AgentProcess:
    proc = AgentProcess(
        env.process_env(
            str(tmp_path / "state"), PHRAME_DESIRED_MQTT_URL=mosquitto.url, PHRAME_OFFLINE_START_S="1"
        ),
        str(tmp_path / f"agent{n}.log"),
    )
    agents.append(proc)
    return proc


def running(env: AgentEnv, names: list[str]) -> bool:
    by_name = {c.name: c.status for c in env.managed()}
    return all(by_name.get(n) == "running" for n in names)


def remove_managed(env: AgentEnv) -> None:
    for c in env.managed():
        c.remove(force=True)
    wait_for(lambda: not env.managed(), "the node's containers removed", 20)


@pytest.mark.slow
def test_an_agent_restarted_without_a_broker_starts_its_containers_from_the_saved_state(
    env: AgentEnv, mosquitto, watcher: ActualWatcher, tmp_path: Path, agents: list[AgentProcess]
):
    specs = [env.container("web"), env.container("db")]
    names = [s["name"] for s in specs]
    first = start_agent(env, mosquitto, tmp_path, agents, 1)
    watcher.publish(spec.topics_doc(env.node, specs))
    watcher.wait_for(lambda: (watcher.status() or {}).get("converged") is True, 40, "converged")
    saved = tmp_path / "state" / "desired" / f"{env.node}.json"
    wait_for(saved.exists, "the saved desired state", 10)
    assert first.terminate() == 0, first.log()

    # a reboot with the broker unreachable: no broker, no containers
    mosquitto.stop()
    remove_managed(env)
    second = start_agent(env, mosquitto, tmp_path, agents, 2)
    wait_for(lambda: running(env, names), "containers started from the saved state", 40)
    assert "converging to the saved desired state" in second.log()
    ids = sorted(c.id for c in env.managed())

    # the broker returns (empty: persistence off): the agent reports, and removes nothing
    with watcher._cond:
        watcher.latest.clear()
    mosquitto.start()
    watcher.wait_for(lambda: (watcher.status() or {}).get("state") == "online", 40, "online again")
    watcher.wait_for(lambda: watcher.item("containers", names[0]) is not None, 20, "items reported")
    assert "its desired plane replaces the saved state" in second.log()
    # the broker's plane wins: the same desired state published again changes nothing
    watcher.publish(spec.topics_doc(env.node, specs))
    watcher.wait_for(lambda: (watcher.status() or {}).get("converged") is True, 30, "converged")
    assert sorted(c.id for c in env.managed()) == ids


@pytest.mark.slow
def test_a_damaged_saved_state_is_refused_and_nothing_starts(
    env: AgentEnv, mosquitto, watcher: ActualWatcher, tmp_path: Path, agents: list[AgentProcess]
):
    specs = [env.container("web")]
    first = start_agent(env, mosquitto, tmp_path, agents, 1)
    watcher.publish(spec.topics_doc(env.node, specs))
    watcher.wait_for(lambda: (watcher.status() or {}).get("converged") is True, 40, "converged")
    saved = tmp_path / "state" / "desired" / f"{env.node}.json"
    wait_for(saved.exists, "the saved desired state", 10)
    assert first.terminate() == 0, first.log()

    mosquitto.stop()
    remove_managed(env)
    saved.write_bytes(saved.read_bytes()[:-20])  # truncated
    second = start_agent(env, mosquitto, tmp_path, agents, 2)
    wait_for(lambda: "saved desired state refused" in second.log(), "the refusal in the log", 20)
    assert "not JSON" in second.log()
    assert env.managed() == []
    assert second.proc.poll() is None  # it waits for the broker


@pytest.mark.slow
def test_sigterm_while_running_on_the_saved_state_ends_the_agent_at_once(
    env: AgentEnv, mosquitto, watcher: ActualWatcher, tmp_path: Path, agents: list[AgentProcess]
):
    specs = [env.container("web")]
    first = start_agent(env, mosquitto, tmp_path, agents, 1)
    watcher.publish(spec.topics_doc(env.node, specs))
    watcher.wait_for(lambda: (watcher.status() or {}).get("converged") is True, 40, "converged")
    wait_for((tmp_path / "state" / "desired" / f"{env.node}.json").exists, "the saved desired state", 10)
    assert first.terminate() == 0, first.log()
    mosquitto.stop()
    remove_managed(env)
    second = start_agent(env, mosquitto, tmp_path, agents, 2)
    wait_for(lambda: running(env, [specs[0]["name"]]), "the container from the saved state", 40)
    began = time.monotonic()
    assert second.terminate() == 0, second.log()
    assert time.monotonic() - began < 4, "SIGTERM waited for a broker it never reached"
    assert running(env, [specs[0]["name"]])  # left running, as on any stop


def test_the_status_is_reported_before_the_desired_state_is_saved(
    env: AgentEnv, mosquitto, watcher: ActualWatcher, tmp_path: Path, agents: list[AgentProcess]
):
    """A push waits for the node's status, not for the saved file's fsync: the converged
    status leaves while the save is held (its temporary file is a FIFO nobody reads, so
    opening it blocks), and the save follows once it can."""
    specs = [env.container("web")]
    folder = tmp_path / "state" / "desired"
    folder.mkdir(parents=True, mode=0o700)
    held = folder / f"{env.node}.json.tmp"
    os.mkfifo(held, 0o600)
    agent = start_agent(env, mosquitto, tmp_path, agents, 1)
    try:
        watcher.publish(spec.topics_doc(env.node, specs))
        watcher.wait_for(lambda: (watcher.status() or {}).get("converged") is True, 40, "converged")
    finally:  # let the held save go on (it fails on the FIFO; the next pass saves the file)
        reader = os.open(held, os.O_RDONLY | os.O_NONBLOCK)
        try:
            wait_for(
                lambda: not held.exists() or not stat.S_ISFIFO(held.stat().st_mode), "the save let go", 20
            )
        finally:
            os.close(reader)
    assert "cannot save the desired state" in agent.log()
    watcher.publish(spec.topics_doc(env.node, [env.container("web", command=["sleep", "3601"])]))
    wait_for((folder / f"{env.node}.json").exists, "the saved desired state", 40)
