"""Several nodes' agents on one Docker daemon (the dev stack, these tests), real dockerd.

First-run defects: racing network creation, a network another node still uses,
a replica moved off a dead node. Each test runs two nodes (``env.node`` and ``<node>-b``)
through a :class:`RecordingPort` and asserts that neither ever acted on the other's objects.
"""

from __future__ import annotations

import threading
from typing import Any

import pytest

from node_agent.container_config import managed_labels
from node_agent.models import NETWORK, NODE
from node_agent.reconcile import NodeReconciler
from schemas import Topics
from tests.support import agent_support as spec
from tests.support.agent_support import ActualWatcher, AgentEnv, AgentProcess, RecordingPort
from tests.support.services import wait_until

T = Topics()


def two_nodes(
    env: AgentEnv, **kw: Any
) -> tuple[NodeReconciler, NodeReconciler, RecordingPort, RecordingPort]:
    a = RecordingPort(env.node, client=env.client, stop_timeout=1)
    b = RecordingPort(env.node + "-b", client=env.client, stop_timeout=1)
    return NodeReconciler(a.node, a, **kw), NodeReconciler(b.node, b, **kw), a, b


def networks_named(env: AgentEnv, name: str) -> list[dict[str, Any]]:
    rows = env.client.api.networks(filters={"name": name})
    return [r for r in rows if r["Name"] == name]


def attached(env: AgentEnv, container: str) -> set[str]:
    return set(env.client.api.inspect_container(container)["NetworkSettings"]["Networks"])


def converged_at(watcher: ActualWatcher, generation: int) -> bool:
    s = watcher.status() or {}
    return s.get("state") == "online" and bool(s.get("converged")) and s.get("generation") == generation


def make_duplicate(env: AgentEnv, net: dict[str, Any], node: str) -> str:
    """A managed network as ``node``'s agent creates it, with no duplicate check: what the
    race of two first passes leaves behind."""
    labels = managed_labels(net, node) | {NETWORK: net["network"]}
    return str(env.client.api.create_network(net["name"], driver="bridge", labels=labels)["Id"])


def first_pass(
    barrier: threading.Barrier,
    results: dict[str, Any],
    key: str,
    rec: NodeReconciler,
    specs: list[dict[str, Any]],
) -> None:
    desired = spec.desired(specs, with_manifest=True)
    barrier.wait()  # both nodes' passes (and their network creations) at the same instant
    results[key] = rec.run_pass(desired)


@pytest.mark.slow
def test_racing_first_passes_converge_on_one_network(env: AgentEnv):
    """Two nodes' first passes at the same instant, each creating ``<env>.<net>`` (the first run's
    race): one network remains and both containers run on it, within three more passes
    (the follow-up passes the loop runs), never forever."""
    for round_ in range(3):
        ra, rb, pa, pb = two_nodes(env)
        net = env.network(f"race{round_}")
        a = env.container(f"a{round_}", networks=[net["name"]])
        b = env.container(f"b{round_}", networks=[net["name"]])
        barrier = threading.Barrier(2)
        results: dict[str, Any] = {}
        threads = [
            threading.Thread(target=first_pass, args=(barrier, results, "a", ra, [net, a])),
            threading.Thread(target=first_pass, args=(barrier, results, "b", rb, [net, b])),
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        # the loop runs a node again soon after it created a network or waits on another
        # node: a rival network that became visible late is sorted out in those passes
        for _ in range(3):
            for key, rec, specs in (("a", ra, [net, a]), ("b", rb, [net, b])):
                if not results[key].converged or len(networks_named(env, net["name"])) > 1:
                    results[key] = rec.run_pass(spec.desired(specs, with_manifest=True))
        for key in ("a", "b"):
            assert results[key].converged, (round_, key, results[key].errors)
        assert len(networks_named(env, net["name"])) == 1
        for c in (a, b):
            assert env.get(c["name"]).status == "running"
            assert attached(env, c["name"]) == {net["name"]}
        pa.assert_only_touched_own()
        pb.assert_only_touched_own()


@pytest.mark.slow
def test_a_duplicate_network_is_removed_by_its_creator_only(env: AgentEnv):
    """Left by the race: the older network wins for everyone; the newer one's creator
    removes it; the other node never touches it."""
    ra, rb, pa, pb = two_nodes(env)
    net = env.network("dup")
    a = env.container("a", networks=[net["name"]])
    b = env.container("b", networks=[net["name"]])
    winner = make_duplicate(env, net, pa.node)
    loser = make_duplicate(env, net, pb.node)
    first_a = ra.run_pass(spec.desired([net, a], with_manifest=True))
    assert not first_a.converged  # node b's duplicate blocks every start by name
    assert any(loser[:12] in e and pb.node in e for e in first_a.errors + first_a.plan.pending)
    assert [r["Id"] for r in networks_named(env, net["name"])].count(loser) == 1  # not a's to remove
    first_b = rb.run_pass(spec.desired([net, b], with_manifest=True))
    assert first_b.converged, first_b.errors
    assert [r["Id"] for r in networks_named(env, net["name"])] == [winner]
    assert ra.run_pass(spec.desired([net, a], with_manifest=True)).converged
    for c in (a, b):
        assert env.get(c["name"]).status == "running" and attached(env, c["name"]) == {net["name"]}
    pa.assert_only_touched_own()
    pb.assert_only_touched_own()


def test_a_dead_nodes_duplicate_is_reported_and_never_removed(env: AgentEnv):
    ra, _rb, pa, _pb = two_nodes(env)
    net = env.network("dup")
    a = env.container("a", networks=[net["name"]])
    make_duplicate(env, net, pa.node)
    theirs = make_duplicate(env, net, "gone-node")
    result = ra.run_pass(spec.desired([net, a], with_manifest=True))
    assert not result.converged
    said = " ".join(result.errors + result.plan.pending)
    assert "gone-node" in said and theirs[:12] in said and "docker network rm" in said
    assert theirs in [r["Id"] for r in networks_named(env, net["name"])]
    pa.assert_only_touched_own()


@pytest.mark.slow
def test_a_network_another_node_uses_is_left_and_the_node_converges(env: AgentEnv):
    """Node a created the network, node b's container runs on it, node a's
    new manifest drops it. Node a leaves it (converged, no retries), and removes it once free."""
    ra, rb, pa, pb = two_nodes(env)
    net = env.network("shared")
    a = env.container("a", networks=[net["name"]])
    b = env.container("b", networks=[net["name"]])
    assert ra.run_pass(spec.desired([net, a], with_manifest=True)).converged
    assert rb.run_pass(spec.desired([net, b], with_manifest=True)).converged
    [row] = networks_named(env, net["name"])
    assert row["Labels"][NODE] == pa.node
    dropped = ra.run_pass(spec.desired([], with_manifest=True))
    assert dropped.converged, dropped.errors
    assert not env.exists(a["name"]) and env.get(b["name"]).status == "running"
    again = ra.run_pass(spec.desired([], with_manifest=True))
    assert again.converged and again.plan.actions == ()  # no removal attempt while in use
    assert networks_named(env, net["name"]) != []
    assert rb.run_pass(spec.desired([], with_manifest=True)).converged  # b leaves: the net is not b's
    assert networks_named(env, net["name"]) != []
    freed = ra.run_pass(spec.desired([], with_manifest=True))
    assert freed.converged and networks_named(env, net["name"]) == []
    pa.assert_only_touched_own()
    pb.assert_only_touched_own()


def test_a_replica_moved_off_a_dead_node_starts_on_its_new_node(env: AgentEnv):
    """With PHRAME_SHARED_DAEMON each node's container has its own name, so
    the replica placement moved to node b starts while dead node a's container still exists."""
    ra, rb, pa, pb = two_nodes(env, shared_daemon=True)
    web = env.container("web", 1)
    assert ra.run_pass(spec.desired([web], with_manifest=True)).converged
    old = env.get(f"{web['name']}.{pa.node}")
    moved = rb.run_pass(spec.desired([web], with_manifest=True))  # node a is gone; b gets it
    assert moved.converged, moved.errors
    new = env.get(f"{web['name']}.{pb.node}")
    assert new.status == "running" and new.labels[NODE] == pb.node
    old.reload()
    assert old.status == "running", "node a's container is node a's to remove"
    assert rb.run_pass(spec.desired([web], with_manifest=True)).plan.actions == ()
    pa.assert_only_touched_own()
    pb.assert_only_touched_own()


def test_without_shared_names_the_advice_names_who_must_act(env: AgentEnv):
    ra, rb, pa, pb = two_nodes(env)
    web = env.container("web", 1)
    assert ra.run_pass(spec.desired([web], with_manifest=True)).converged
    blocked = rb.run_pass(spec.desired([web], with_manifest=True))
    assert not blocked.converged
    [error] = blocked.errors
    assert f"node {pa.node}'s container" in error and f"{pa.node}'s agent must remove it" in error
    assert "PHRAME_SHARED_DAEMON=true" in error and "fix the placement" not in error
    assert env.get(web["name"]).labels[NODE] == pa.node
    pb.assert_only_touched_own()


def test_recording_port_sees_a_foreign_touch(env: AgentEnv):
    """The guard used above can fail: acting on another node's container is caught."""
    ra, _rb, pa, pb = two_nodes(env)
    web = env.container("web")
    assert ra.run_pass(spec.desired([web], with_manifest=True)).converged
    pb.start(env.get(web["name"]).id)
    try:
        pb.assert_only_touched_own()
    except AssertionError as e:
        assert web["name"] in str(e)
    else:
        raise AssertionError("a touch of node a's container went unnoticed")
    pa.assert_only_touched_own()


@pytest.mark.slow
def test_the_dev_stack_case_through_two_agent_loops(env: AgentEnv, mosquitto, tmp_path):
    """Two ``phrame node-agent`` processes with PHRAME_SHARED_DAEMON=true start together on
    one daemon (one network for both), node a is lost, its replica moves to node b, node b
    restarts it on request and later drops everything while node a's container still
    uses the network: node b converges every time and never touches node a's objects."""
    nodes = [env.node, env.node + "-b"]
    watchers = {n: ActualWatcher(mosquitto.url, n) for n in nodes}
    net = env.network("back")
    web = [env.container("web", r, networks=[net["name"]]) for r in (0, 1)]
    for node, replica in zip(nodes, web, strict=True):
        watchers[node].publish(spec.topics_doc(node, [net, replica]))
    agents = {
        n: AgentProcess(
            env.process_env(
                str(tmp_path / n),
                PHRAME_NODE_NAME=n,
                PHRAME_DESIRED_MQTT_URL=mosquitto.url,
                PHRAME_SHARED_DAEMON="true",
            ),
            str(tmp_path / f"{n}.log"),
        )
        for n in nodes
    }
    a, b = nodes
    try:
        for n in nodes:
            watchers[n].wait_for(lambda n=n: converged_at(watchers[n], 1), 40, f"{n} converged")
        assert len(networks_named(env, net["name"])) == 1
        moved_away = env.get(f"{web[0]['name']}.{a}")
        agents[a].kill()  # node a is lost; its container keeps running, as agents leave them
        doc = spec.topics_doc(b, [net, *web])
        doc[T.manifest(b)]["generation"] = 2
        watchers[b].publish(doc)
        watchers[b].wait_for(lambda: converged_at(watchers[b], 2), 30, "node b converged on the move")
        arrived = env.get(f"{web[0]['name']}.{b}")
        assert arrived.status == "running"
        assert watchers[b].item("containers", web[0]["name"])["state"] == "running"  # item ids unchanged
        started = arrived.attrs["State"]["StartedAt"]
        watchers[b].client.publish(T.restart(b, web[0]["name"]), spec.restart_payload(), False)
        wait_until(
            lambda: env.get(arrived.id).attrs["State"]["StartedAt"] != started, "restart on request", 15
        )
        empty = spec.topics_doc(b, [])
        empty[T.manifest(b)]["generation"] = 3
        watchers[b].publish(empty | {T.desired_item(b, "containers", r["name"]): None for r in web})
        watchers[b].wait_for(lambda: converged_at(watchers[b], 3), 30, "node b converged on nothing")
        assert networks_named(env, net["name"]) != []  # node a's container is still on it
        old = env.client.api.inspect_container(moved_away.id)["State"]
        assert old["Running"] and old["StartedAt"] == moved_away.attrs["State"]["StartedAt"]
    finally:
        for n in nodes:
            agents[n].terminate()
            watchers[n].stop()
