"""Restart commands against a real agent, mosquitto and dockerd: a retained or stale command
never restarts anything, neither when sent nor when the broker replays it to a restarted
agent; a repeated id runs once. A fresh command to another container is the barrier that
shows the agent has handled what came before it (commands run in order)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from schemas import Topics
from tests.support import agent_support as spec
from tests.support.agent_support import ActualWatcher, AgentEnv, AgentProcess, restart_payload
from tests.support.services import wait_until
from tests.support.waiting import wait_for

pytestmark = [pytest.mark.slow, pytest.mark.mqtt]
T = Topics()


def start_agent(mosquitto, env: AgentEnv, tmp_path: Path) -> AgentProcess:
    return AgentProcess(
        env.process_env(str(tmp_path / "state"), PHRAME_DESIRED_MQTT_URL=mosquitto.url),
        str(tmp_path / "agent.log"),
    )


def started_at(env: AgentEnv, name: str) -> str:
    return str(env.get(name).attrs["State"]["StartedAt"])


@pytest.fixture
def fleet(mosquitto, env: AgentEnv, watcher: ActualWatcher, tmp_path: Path) -> Iterator[list[AgentProcess]]:
    """Web and a barrier container, converged; the agents the test started (stopped after),
    and the command topics cleared so no retained command outlives the test."""
    agents = [start_agent(mosquitto, env, tmp_path)]
    watcher.publish(spec.topics_doc(env.node, [env.container("web"), env.container("barrier")]))
    watcher.wait_for(lambda: (watcher.status() or {}).get("converged") is True, what="converged")
    yield agents
    for a in agents:
        a.terminate()
    watcher.client.publish_batch(
        [(T.restart(env.node, f"{env.env}.{s}.0"), None) for s in ("web", "barrier")]
    )


def barrier(env: AgentEnv, watcher: ActualWatcher) -> None:
    """Restart the barrier container with a fresh command and wait until it restarted."""
    name = f"{env.env}.barrier.0"
    before = started_at(env, name)
    watcher.client.publish_batch([(T.restart(env.node, name), restart_payload())], retain=False)
    wait_until(lambda: started_at(env, name) != before, "the barrier container restarted", 20)


def test_retained_stale_and_repeated_commands_never_restart(
    mosquitto, env: AgentEnv, watcher: ActualWatcher, fleet: list[AgentProcess], tmp_path: Path
) -> None:
    web = f"{env.env}.web.0"
    topic = T.restart(env.node, web)
    first = started_at(env, web)

    # a stale command, retained (as the finding had it: ts 0)
    watcher.client.publish_batch([(topic, restart_payload(ts=0))])
    barrier(env, watcher)
    assert started_at(env, web) == first, "a command of 1970 restarted the container"

    # a fresh command, sent twice with one id: runs once
    once = restart_payload()
    watcher.client.publish_batch([(topic, once), (topic, once)], retain=False)
    wait_until(lambda: started_at(env, web) != first, "the fresh command restarted web", 20)
    second = started_at(env, web)
    barrier(env, watcher)
    assert started_at(env, web) == second, "one command id ran twice"

    # a fresh command left retained reaches a restarted agent as the broker's replay: dropped
    watcher.client.publish_batch([(topic, restart_payload())])  # live: runs once
    wait_until(lambda: started_at(env, web) != second, "the retained fresh command ran live", 20)
    third = started_at(env, web)
    assert fleet[0].terminate() == 0
    fleet.append(start_agent(mosquitto, env, tmp_path))
    wait_for(lambda: "it is retained" in fleet[-1].log(), "the new agent to drop the replayed command", 30)
    barrier(env, watcher)
    assert started_at(env, web) == third, "the broker's replay of a retained command restarted web"
    log = fleet[-1].log()
    assert "s old" in log and "already ran" in log, log[-4000:]
