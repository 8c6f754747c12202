"""A container that died and the agent started again is visible on the actual plane.

``docker kill`` of a managed container: a real ``phrame node-agent`` starts it again within
a second, and its actual item then carries Docker's ``finished_at`` (the kill) and
``last_exit`` (exit code 137, restarted by the agent), unlike ``restart_count`` and
``exit_code``, which Docker resets. The item is not republished on every pass, and a new
agent process takes the exit code back from its own retained report.
"""

from __future__ import annotations

import time
from datetime import datetime
from pathlib import Path

import pytest

from tests.support.agent_support import ActualWatcher, AgentEnv, AgentProcess, topics_doc
from tests.support.services import wait_until


def docker_time(text: str) -> float:
    """Docker's RFC 3339 time with nanoseconds, as unix seconds (microsecond precision)."""
    head, _, frac = text.rstrip("Z").partition(".")
    return datetime.fromisoformat(f"{head}.{(frac + '000000')[:6]}+00:00").timestamp()


def start_agent(env: AgentEnv, tmp_path: Path, url: str, name: str) -> AgentProcess:
    process_env = env.process_env(str(tmp_path / "state"), PHRAME_DESIRED_MQTT_URL=url)
    return AgentProcess(process_env, str(tmp_path / f"{name}.log"))


def converged(watcher: ActualWatcher) -> bool:
    s = watcher.status()
    return bool(s) and s["state"] == "online" and s["converged"] and s["generation"] == 1


@pytest.mark.slow
def test_a_killed_container_restarted_by_the_agent_reports_its_exit(
    env: AgentEnv, watcher: ActualWatcher, mosquitto, tmp_path: Path
):
    web = env.container("web")
    item_id = web["name"]
    watcher.publish(topics_doc(env.node, [web]))
    agent = start_agent(env, tmp_path, mosquitto.url, "agent-1")
    try:
        watcher.wait_for(lambda: converged(watcher), what="the node converged")
        first = watcher.item("containers", item_id)
        assert first["finished_at"] is None, first  # never exited: Docker's zero time is no time
        assert first["last_exit"] is None and first["agent_restarts"] == 0, first
        before = env.get(item_id).attrs["State"]["StartedAt"]
        killed_at = time.time()
        env.get(item_id).kill()

        def restarted() -> bool:
            state = env.get(item_id).attrs["State"]
            return bool(state["Running"]) and state["StartedAt"] != before

        wait_until(restarted, f"{item_id} started again after docker kill", 5)
        watcher.wait_for(
            lambda: (watcher.item("containers", item_id) or {}).get("last_exit") is not None,
            5,
            f"the report of {item_id}'s exit",
        )
        report = watcher.item("containers", item_id)
        assert report["state"] == "running", report
        assert report["restart_count"] == 0, "Docker's own count: it did not restart it"
        finished = docker_time(report["finished_at"])
        assert killed_at - 0.05 <= finished <= time.time(), (killed_at, report)
        assert report["last_exit"] == {
            "exit_code": 137,
            "finished_at": report["finished_at"],
            "restarted_by": "agent",
        }
        assert report["agent_restarts"] == 1, report

        # byte-stable: passes keep running (1 s resync), the report is not sent again
        topic = watcher.topics.actual_item(env.node, "containers", item_id)
        sent = watcher.counts[topic]
        watcher.wait_passes(3)
        assert watcher.counts[topic] == sent, "an unchanged item was republished"
    finally:
        assert agent.terminate() == 0, agent.log()

    # a new agent process: Docker keeps FinishedAt, the exit code comes back from the
    # agent's own retained report of that same exit
    agent = start_agent(env, tmp_path, mosquitto.url, "agent-2")
    try:
        watcher.wait_passes(3)
        again = watcher.item("containers", item_id)
        assert again["finished_at"] == report["finished_at"], again
        assert again["last_exit"] == report["last_exit"], again
        assert again["agent_restarts"] == 1, again
    finally:
        assert agent.terminate() == 0, agent.log()
