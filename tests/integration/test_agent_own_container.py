"""The node agent running inside a Docker container never touches its own container.

The agent runs in a busybox container (host Python bind-mounted, see
``tests.support.agent_container``) labelled and named as a managed item of its own node,
against real dockerd and mosquitto. A complete manifest that does not list it must not
remove it, while an identically labelled twin container IS removed in the same pass (the
control: pruning was live), and a restart command aimed at it is refused; also when the
agent shares another container's network (and so sees that one's /etc bind mounts).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from schemas import Topics
from tests.support import agent_support as spec
from tests.support import docker as docker_support
from tests.support.agent_container import logs, managed_labels, start_agent_container, stop_quietly
from tests.support.agent_support import ActualWatcher, AgentEnv
from tests.support.services import wait_until
from tests.support.waiting import wait_for

T = Topics()
REFUSED = "it is the agent's own container"
StartAgent = Callable[..., Any]


@pytest.fixture
def twin(env: AgentEnv) -> Any:
    """An ordinary managed container of the node, labelled like the agent's: not desired."""
    labels = managed_labels(env.node, env.env, "agent", 1, env.label)
    return env.client.containers.run(
        env.image, ["sleep", "3600"], name=f"{env.env}.agent.1", labels=labels, detach=True
    )


@pytest.fixture
def start_agent(env: AgentEnv, mosquitto: Any, twin: Any, tmp_path: Path) -> Iterator[StartAgent]:
    """Starts the agent in a container named ``<env>.agent.0`` with its node's managed labels."""
    started: list[Any] = []

    def start(network_mode: str, cgroupns: str | None = None) -> Any:
        box = start_agent_container(
            env.client,
            env.image,
            name=f"{env.env}.agent.0",
            labels=managed_labels(env.node, env.env, "agent", 0, env.label),
            state_dir=tmp_path / "state",
            environment={
                "PHRAME_NODE_NAME": env.node,
                "PHRAME_DESIRED_MQTT_URL": mosquitto.url,  # one plane set: both use it
                "PHRAME_STOP_TIMEOUT_S": "1",
                "PHRAME_HEARTBEAT_S": "0.5",
                "PHRAME_RESYNC_S": "1",
            },
            network_mode=network_mode,
            cgroupns=cgroupns,
        )
        started.append(box)
        return box

    yield start
    for box in started:
        stop_quietly(box)


def wait(watcher: ActualWatcher, box: Any, predicate: Callable[[], object], what: str) -> None:
    """:func:`tests.support.waiting.wait_for` up to 30 s for ``predicate``; fails at once (with
    the agent's log) if the agent's container stops running."""

    def holds() -> object:
        if predicate():
            return True
        box.reload()
        if box.status != "running":
            raise AssertionError(f"agent container {box.status} waiting for {what}; its log:\n{logs(box)}")
        return False

    try:
        wait_for(holds, what, 30, interval=0.2, observe=lambda: f"status={watcher.status()}")
    except AssertionError as e:
        if box.status != "running":
            raise
        raise AssertionError(f"{e}\nits log:\n{logs(box)}") from None


def state_of(box: Any) -> dict[str, Any]:
    box.reload()
    return dict(box.attrs["State"]) | {"Id": box.id, "RestartCount": box.attrs["RestartCount"]}


def check_keeps_itself(env: AgentEnv, watcher: ActualWatcher, box: Any, twin: Any) -> dict[str, Any]:
    """Converge a manifest not listing the agent; it prunes the twin, keeps itself, refuses
    to restart itself. Returns the desired item's spec."""
    own = box.name
    wait(watcher, box, lambda: (watcher.status() or {}).get("state") == "online", "agent online")
    before = state_of(box)
    assert before["Running"], logs(box)

    web = env.container("web")  # the complete manifest lists only this item
    watcher.publish(spec.topics_doc(env.node, [web]))
    wait(watcher, box, lambda: (watcher.status() or {}).get("generation") == 1, "converged")
    status = watcher.status()
    assert status["converged"] and status["errors"] == [], status
    assert env.get(web["name"]).status == "running"  # created: the agent really converged
    wait_until(lambda: not env.exists(twin.name), "the undesired twin removed (control)", 10)
    # ...but not itself: same container, never restarted, and reported as a running item
    assert state_of(box) == before
    own_item = watcher.item("containers", own)
    assert own_item["state"] == "running" and own_item["digest"] is None, own_item

    # across further resyncs (PHRAME_RESYNC_S=1) it is still left alone
    seen = watcher.passes()
    wait(watcher, box, lambda: watcher.passes() >= seen + 2, "two more passes")
    assert state_of(box) == before
    assert [c.name for c in env.managed() if c.name != own] == [web["name"]]

    # a restart aimed at itself is refused; one at the item (queued after it) is obeyed,
    # so once the item restarted the agent has handled both commands in order
    web_started = env.get(web["name"]).attrs["State"]["StartedAt"]
    for name in (own, web["name"]):
        watcher.client.publish(T.restart(env.node, name), spec.restart_payload(), False)

    def item_restarted() -> bool:
        assert state_of(box) == before, f"the agent restarted itself:\n{logs(box)}"
        return bool(env.get(web["name"]).attrs["State"]["StartedAt"] != web_started)

    wait_until(item_restarted, "item restarted", 15)
    assert state_of(box) == before
    assert f"refused restart of {own}: {REFUSED}" in logs(box)
    return web


@pytest.mark.slow
def test_agent_in_a_container_keeps_itself_and_refuses_to_restart_it(
    env: AgentEnv, watcher: ActualWatcher, start_agent: StartAgent, twin: Any
):
    box = start_agent("host")
    web = check_keeps_itself(env, watcher, box, twin)

    # it was alive all along: SIGTERM makes it publish offline and exit 0
    stop_quietly(box)
    watcher.wait_for(lambda: watcher.status()["state"] == "offline", 10, "offline status")
    assert state_of(box)["ExitCode"] == 0, logs(box)
    assert env.get(web["name"]).status == "running"  # containers are left running


@pytest.mark.slow
def test_agent_sharing_another_containers_network_still_knows_itself(
    env: AgentEnv, watcher: ActualWatcher, start_agent: StartAgent, twin: Any
):
    # With --network container:<other>, Docker bind-mounts the OTHER container's
    # /etc/hostname, hosts and resolv.conf into the agent: those name the wrong container.
    other = env.client.containers.run(
        env.image,
        ["sleep", "3600"],
        network_mode="host",
        labels=docker_support.labels(env.label),
        detach=True,
    )
    # A private cgroup namespace (cgroup v2's default) hides its cgroup path too: only its
    # overlay root, matched against the daemon's GraphDriver data, names it.
    box = start_agent(f"container:{other.id}", cgroupns="private")
    check_keeps_itself(env, watcher, box, twin)
    assert env.get(other.id).status == "running"  # unmanaged: never touched
    assert f"in container {box.id[:12]}" in logs(box)
