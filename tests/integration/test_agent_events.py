"""Docker events through the agent loop: a killed container is back at once.

Two ``phrame node-agent`` processes share the one daemon with a 30 s resync, so only the
``die`` event can bring the container back in time; the other node's container is never
touched, and the actual plane reports the new start, not the stale ``running``.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from pathlib import Path

import docker
import pytest

from node_agent.reconcile import NodeReconciler
from schemas import Topics
from tests.support import agent_support as spec
from tests.support.agent_support import ActualWatcher, AgentEnv, AgentProcess, RecordingPort
from tests.support.services import wait_until

T = Topics()


@pytest.fixture
def node_b(mosquitto, env: AgentEnv) -> Iterator[ActualWatcher]:
    w = ActualWatcher(mosquitto.url, env.node + "-b")
    yield w
    w.stop()


def start_agent(env: AgentEnv, node: str, url: str, tmp_path: Path) -> AgentProcess:
    process_env = env.process_env(
        str(tmp_path / node), PHRAME_DESIRED_MQTT_URL=url, PHRAME_RESYNC_S="30", PHRAME_NODE_NAME=node
    )
    return AgentProcess(process_env, str(tmp_path / f"{node}.log"))


def converged(watcher: ActualWatcher) -> bool:
    s = watcher.status()
    return bool(s) and s["state"] == "online" and s["converged"] and s["generation"] == 1


@pytest.mark.slow
def test_a_killed_container_is_back_within_a_second_and_reported_so(
    env: AgentEnv, watcher: ActualWatcher, node_b: ActualWatcher, mosquitto, tmp_path: Path
):
    web = env.container("web")
    api = env.container("api", restart="unless-stopped")  # docker kill is a manual stop: no restart
    theirs = env.container("other")
    watcher.publish(spec.topics_doc(env.node, [web, api]))
    node_b.publish(spec.topics_doc(node_b.node, [theirs]))
    agents = [start_agent(env, n, mosquitto.url, tmp_path) for n in (env.node, node_b.node)]
    try:
        watcher.wait_for(lambda: converged(watcher), what="node a converged")
        node_b.wait_for(lambda: converged(node_b), what="node b converged")
        other = env.get(theirs["name"])
        other_started = other.attrs["State"]["StartedAt"]
        for item in (web, api):
            name = item["name"]
            before = env.get(name).attrs["State"]["StartedAt"]
            killed_at = time.monotonic()
            env.get(name).kill()

            def restarted(name: str = name, before: str = before) -> bool:
                state = env.get(name).attrs["State"]
                return bool(state["Running"]) and state["StartedAt"] != before

            wait_until(restarted, f"{name} started again after docker kill", 3)
            took = time.monotonic() - killed_at
            assert took < 2.5, f"{name} was down {took:.2f} s"
            now = env.get(name).attrs["State"]["StartedAt"]
            watcher.wait_for(
                lambda name=name, now=now: (watcher.item("containers", name) or {}).get("started_at") == now,
                3,
                f"the report of {name}'s new start",
            )
            assert watcher.item("containers", name)["state"] == "running"
        other.reload()  # node b's agent never acted on node a's events, nor a on b's container
        assert other.status == "running" and other.attrs["State"]["StartedAt"] == other_started
        assert node_b.status()["converged"]
    finally:
        for agent in agents:
            assert agent.terminate() == 0, agent.log()


@pytest.mark.slow
def test_a_container_docker_restarts_by_its_policy_is_left_to_docker(env: AgentEnv):
    """A crash under ``restart: always`` is Docker's to restart (it shows ``restarting``):
    passes run right after each ``die`` (as the loop runs them) never start it themselves."""
    port = RecordingPort(env.node, client=env.client, stop_timeout=1)
    crash = env.container("crash", command=["sh", "-c", "sleep 0.5; exit 3"], restart="always")
    reconciler = NodeReconciler(env.node, port)
    assert (
        reconciler.run_pass(spec.desired([crash], with_manifest=True)).plan.actions[-1].op.value == "create"
    )
    port.touched.clear()  # the create's own start
    events = port.events()
    try:
        seen = 0
        for event in events:
            if event.get("Action") != "die":
                continue
            port.settle([event["id"]])
            reconciler.run_pass(spec.desired([crash], with_manifest=True))
            seen += 1
            if seen == 3:
                break
    finally:
        events.close()  # type: ignore[attr-defined]
    assert env.get(crash["name"]).attrs["RestartCount"] >= 3, "Docker restarted it"
    assert [t for t in port.touched if t[0] == "start"] == [], port.touched


@pytest.mark.slow
def test_a_pass_whose_action_failed_is_tried_again_soon_not_at_the_resync(
    env: AgentEnv, watcher: ActualWatcher, mosquitto, tmp_path: Path, docker_client
):
    """What made an action fail can pass with no container event to say so (an image
    appearing, a dependency coming up by its restart policy, a daemon just restarted): the
    agent tries a failed pass again with backoff from 1 s, not at the next resync (here 300 s).
    Before, it waited for the resync."""
    image = f"127.0.0.1:1/phrame-retry-{env.node}:1"  # no registry there: the pull is refused
    web = env.container("web", image=image)
    watcher.publish(spec.topics_doc(env.node, [web]))
    process_env = env.process_env(
        str(tmp_path / env.node), PHRAME_DESIRED_MQTT_URL=mosquitto.url, PHRAME_RESYNC_S="300"
    )
    agent = AgentProcess(process_env, str(tmp_path / "agent.log"))
    try:
        watcher.wait_for(lambda: bool((watcher.status() or {}).get("errors")), 30, "the failed pull reported")
        assert not watcher.status()["converged"]
        docker_client.images.get(env.image).tag(image)  # no container event: only a retry sees it
        watcher.wait_for(
            lambda: converged(watcher), 15, "converged once the image is there, long before the resync"
        )
        assert env.get(web["name"]).status == "running"
    finally:
        try:
            assert agent.terminate() == 0, agent.log()
        finally:
            with contextlib.suppress(docker.errors.ImageNotFound):  # the tag only, never busybox
                docker_client.images.remove(image, noprune=True)
