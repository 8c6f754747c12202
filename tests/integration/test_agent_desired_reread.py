"""The agent reads its desired topics back when its subscription goes quiet (real mosquitto,
real dockerd, the agent's loop in this process).

A clustered broker's node can stop delivering a subscription while the connection lives
(NATS: the subscription's JetStream consumer lost with the node that hosted it), or serve
an older retained set. Here the broker is told to drop the agent's subscription behind the
agent's back (an UNSUBSCRIBE on its connection); a commit published afterwards reaches the
node only through the agent's read-back: within ``PHRAME_DESIRED_REREAD_S``, sooner when
what arrived is incomplete.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import docker
import pytest

from node_agent.docker_port import DockerPort
from node_agent.loop import Agent
from node_agent.processes import ProcessSupervisor
from node_agent.settings import AgentSettings
from phrame.mqtt import MqttSettings
from schemas import Topics
from tests.support import agent_support as spec
from tests.support.agent_support import ActualWatcher, AgentEnv
from tests.support.waiting import wait_for

pytestmark = [pytest.mark.docker, pytest.mark.mqtt, pytest.mark.slow]
T = Topics()


def running_agent(
    env: AgentEnv, url: str, tmp_path: Path, client: docker.DockerClient, *, reread_s: float
) -> tuple[Agent, threading.Thread]:
    settings = AgentSettings(
        node=env.node, state_dir=tmp_path / "state", heartbeat_s=0.5, resync_s=30, desired_reread_s=reread_s
    )
    mqtt = MqttSettings(url=url)
    agent = Agent(
        settings,
        docker=DockerPort(env.node, client=client, stop_timeout=1),
        supervisor=ProcessSupervisor(settings.state_dir, stop_timeout=1),
        desired_mqtt=mqtt,
        actual_mqtt=mqtt,
    )
    thread = threading.Thread(target=agent.run, name="agent-under-test", daemon=True)
    thread.start()
    return agent, thread


@pytest.fixture
def agent(mosquitto, env: AgentEnv, tmp_path: Path, docker_client) -> Iterator[Agent]:
    agent, thread = running_agent(env, mosquitto.url, tmp_path, docker_client, reread_s=3.0)
    yield agent
    agent.stop()
    thread.join(15)


def version(env: AgentEnv, name: str) -> str:
    if not env.exists(name):
        return ""
    c = env.get(name)
    if c.status != "running":
        return ""
    return dict(e.split("=", 1) for e in c.attrs["Config"]["Env"] if "=" in e).get("V", "")


def converged_on(watcher: ActualWatcher, generation: int) -> bool:
    s = watcher.status()
    return bool(s) and bool(s.get("converged")) and s.get("generation") == generation


def test_a_commit_the_subscription_did_not_deliver_is_read_back(
    env: AgentEnv, watcher: ActualWatcher, agent: Agent
) -> None:
    v1 = env.container("web", env={"V": "1"})
    watcher.publish(spec.topics_doc(env.node, [v1]))
    watcher.wait_for(lambda: converged_on(watcher, 1), what="generation 1 applied")
    # the broker stops delivering the agent's subscription; the agent is not told
    wait_for(lambda: agent.desired_client.is_connected, "the agent connected", 10)
    agent.desired_client._paho.unsubscribe(T.desired_node_filter(env.node))
    v2 = env.container("web", env={"V": "2"})
    doc = spec.topics_doc(env.node, [v2])
    doc[T.manifest(env.node)]["generation"] = 2
    watcher.publish(doc)
    # nothing else happens on the node: no message, no Docker event; only the read-back
    wait_for(lambda: version(env, v2["name"]) == "2", "generation 2 running (read back)", 20)
    watcher.wait_for(lambda: converged_on(watcher, 2), what="generation 2 applied")
    assert agent.reread.reads >= 1
