"""The agent loop keeps going: bad objects, Docker outages, long passes, its own container.

Real mosquitto and dockerd. Some tests drive an in-process :class:`Agent` one pass at a
time (its restart queue, an unreachable daemon); the others run ``phrame node-agent`` as
a subprocess and read its actual plane back with a watcher.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import docker
import pytest

from node_agent.docker_port import DockerPort
from node_agent.loop import Agent
from node_agent.models import MANAGED, NODE
from node_agent.processes import ProcessSupervisor
from node_agent.settings import AgentSettings
from phrame.mqtt import Message, MqttSettings
from schemas import Topics
from tests.support import agent_support as spec
from tests.support.agent_support import ActualWatcher, AgentEnv, AgentProcess
from tests.support.docker import TEST_LABEL
from tests.support.services import free_port
from tests.support.waiting import wait_for

T = Topics()


def in_process_agent(
    env: AgentEnv, url: str, tmp_path: Path, port: DockerPort, own_id: str | None = None
) -> Agent:
    settings = AgentSettings(node=env.node, state_dir=tmp_path / "state", heartbeat_s=0.5)
    mqtt = MqttSettings(url=url)
    agent = Agent(
        settings,
        docker=port,
        supervisor=ProcessSupervisor(settings.state_dir, stop_timeout=1),
        desired_mqtt=mqtt,
        actual_mqtt=mqtt,
        own_container_id=own_id,
    )
    agent.actual_client.start()
    return agent


def restart_cmd(agent: Agent, item_id: str) -> None:
    assert agent.commands.accept(Message(T.restart(agent.node, item_id), spec.restart_payload(), False))


def status_errors(watcher: ActualWatcher) -> list[str]:
    return list((watcher.status() or {}).get("errors") or [])


def test_a_restart_while_docker_is_down_fails_the_pass_not_the_loop(
    env: AgentEnv, mosquitto, watcher: ActualWatcher, tmp_path: Path
):
    # nothing listens there: every Docker call fails as "Docker unreachable"
    nowhere = docker.DockerClient(base_url=f"tcp://127.0.0.1:{free_port()}", version="1.41")
    agent = in_process_agent(env, mosquitto.url, tmp_path, DockerPort(env.node, client=nowhere, attempts=1))
    try:
        restart_cmd(agent, f"{env.env}.web.0")
        agent.run_pass()  # must not raise
        watcher.wait_for(
            lambda: any("pass failed" in e and "unreachable" in e for e in status_errors(watcher)),
            10,
            "the failure on the node status",
        )
        agent.run_pass()  # and the next pass runs too
        assert agent.passes == 2
    finally:
        agent.actual_client.stop()
        nowhere.close()


@pytest.mark.slow
def test_the_restart_command_refuses_the_agents_own_container(env: AgentEnv, mosquitto, tmp_path: Path):
    me, other = env.container("agent"), env.container("other")
    env.reconciler().run_pass(spec.desired([me, other]))
    own_id = env.get(me["name"]).id
    port = DockerPort(env.node, client=env.client, stop_timeout=1)
    agent = in_process_agent(env, mosquitto.url, tmp_path, port, own_id=own_id[:12])
    try:
        started = {n: env.get(n).attrs["State"]["StartedAt"] for n in (me["name"], other["name"])}
        restart_cmd(agent, me["name"])
        restart_cmd(agent, other["name"])
        agent.run_pass()
        assert env.get(me["name"]).attrs["State"]["StartedAt"] == started[me["name"]]
        assert env.get(other["name"]).attrs["State"]["StartedAt"] != started[other["name"]]
    finally:
        agent.actual_client.stop()


@pytest.mark.slow
def test_a_managed_container_with_a_bad_name_is_reported_and_skipped(
    env: AgentEnv, mosquitto, watcher: ActualWatcher, tmp_path: Path
):
    odd_name = f"{env.env}.Odd_Name.0"
    labels = {MANAGED: "true", NODE: env.node, TEST_LABEL: env.label}
    env.client.containers.create(env.image, ["sleep", "3600"], name=odd_name, labels=labels)
    web = env.container("web")
    watcher.publish(spec.topics_doc(env.node, [web]))
    agent = AgentProcess(
        env.process_env(str(tmp_path / "state"), PHRAME_DESIRED_MQTT_URL=mosquitto.url),
        str(tmp_path / "agent.log"),
    )
    try:
        watcher.wait_for(
            lambda: any(odd_name in e and "not an item id" in e for e in status_errors(watcher)),
            30,
            "the odd container on the node status",
        )
        watcher.wait_for(lambda: (watcher.item("containers", web["name"]) or {}).get("state") == "running")
        assert agent.proc.poll() is None, agent.log()
        assert env.get(odd_name).status == "created"  # never started, removed or reported
        env.get(odd_name).remove(force=True)
        watcher.wait_for(lambda: bool(watcher.status()["converged"]), 30, "converged once it is gone")
    finally:
        assert agent.terminate() == 0, agent.log()


@pytest.mark.slow
def test_heartbeats_flow_while_a_pass_waits_and_sigterm_ends_the_wait(
    env: AgentEnv, mosquitto, watcher: ActualWatcher, tmp_path: Path
):
    never: dict[str, Any] = {"test": ["CMD", "false"], "interval": "200ms", "retries": 1000}
    db = env.container("db", healthcheck=never)
    web = env.container("web", depends_on=[db["name"]])
    watcher.publish(spec.topics_doc(env.node, [db, web]))
    agent = AgentProcess(
        env.process_env(
            str(tmp_path / "state"), PHRAME_DESIRED_MQTT_URL=mosquitto.url, PHRAME_HEARTBEAT_S="0.3"
        ),
        str(tmp_path / "agent.log"),
    )
    try:
        wait_for(
            lambda: env.exists(db["name"]) and env.get(db["name"]).status == "running",
            "db running",
            30,
            observe=agent.log,
        )

        def seq() -> int:
            return int((watcher.latest.get(T.heartbeat(env.node)) or {}).get("seq", -1))

        # the pass now waits for db to be healthy (up to 120 s): six heartbeats flow meanwhile,
        # and they show that no pass ended or began (the counter stands) and web is not created
        watcher.wait_for(lambda: watcher.passes() > 0, 10, "a heartbeat counting the waiting pass")
        first, waiting = seq(), watcher.passes()
        watcher.wait_for(lambda: seq() - first >= 6, 10, f"six heartbeats after {first} during the pass")
        assert watcher.passes() == waiting, "the pass should still be waiting for db"
        assert not env.exists(web["name"]), "the pass should still be waiting for db"
    finally:
        began = time.monotonic()
        code = agent.terminate()
    assert code == 0, agent.log()
    assert time.monotonic() - began < 8, "SIGTERM did not end the wait_ready quickly"
    watcher.wait_for(lambda: watcher.status()["state"] == "offline", 5, "offline status")


@pytest.mark.slow
def test_an_agent_that_boots_before_its_broker_waits_for_it(env: AgentEnv, mosquitto, tmp_path: Path):
    """A host often boots before its broker: the agent waits, then converges; it never exits."""
    mosquitto.stop()
    web = env.container("web")
    agent = AgentProcess(
        env.process_env(
            str(tmp_path / "state"),
            PHRAME_DESIRED_MQTT_URL=mosquitto.url,
            PHRAME_MQTT_NO_CONNECTION_WARN_S="0.5",
        ),
        str(tmp_path / "agent.log"),
    )
    try:
        # only a start without a deadline warns: seeing the warning shows the agent waits
        wait_for(lambda: "still no connection" in agent.log(), "the 'still no connection' warning", 8)
        assert agent.proc.poll() is None, f"the agent gave up without a broker:\n{agent.log()}"
        mosquitto.start()
        watcher = ActualWatcher(mosquitto.url, env.node)
        try:
            watcher.publish(spec.topics_doc(env.node, [web]))
            watcher.wait_for(lambda: (watcher.status() or {}).get("converged") is True, 30, "converged")
            assert env.get(web["name"]).status == "running"
        finally:
            watcher.stop()
    finally:
        code = agent.terminate()
    assert code == 0, agent.log()


def test_sigterm_while_waiting_for_the_broker_ends_the_agent_cleanly(env: AgentEnv, tmp_path: Path):
    nowhere = f"mqtt://127.0.0.1:{free_port()}"
    agent = AgentProcess(
        env.process_env(str(tmp_path / "state"), PHRAME_DESIRED_MQTT_URL=nowhere),
        str(tmp_path / "agent.log"),
    )
    wait_for(lambda: "cannot connect" in agent.log(), "the agent trying the broker", 10, observe=agent.log)
    assert agent.proc.poll() is None, agent.log()
    began = time.monotonic()
    code = agent.terminate()
    assert code == 0, agent.log()
    assert time.monotonic() - began < 5, "SIGTERM did not end the wait for the broker"
    assert "stopped before it reached the broker" in agent.log()
