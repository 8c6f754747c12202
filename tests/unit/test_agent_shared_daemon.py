"""Pure decisions for several nodes on one daemon: network winners, who removes what, names."""

from __future__ import annotations

from typing import Any

import pytest

from node_agent.commands import RestartCommands
from node_agent.errors import SettingsError
from node_agent.models import DIGEST, MANAGED, NODE, ActualState, ObservedContainer, ObservedNetwork, Op
from node_agent.naming import name_held
from node_agent.networks import created_key, split_duplicates
from node_agent.plan import compute_plan
from node_agent.settings import AgentSettings
from phrame.mqtt import Message
from schemas import Topics
from tests.support.agent_support import container, desired, item_labels, network, restart_payload

A, B = "node-a", "node-b"


def net(name: str, node: str, created: str, nid: str) -> ObservedNetwork:
    return ObservedNetwork(nid, name, {MANAGED: "true", NODE: node}, created)


def box(item: str, node: str = A, *, name: str | None = None, state: str = "running", **kw: Any):
    labels = {MANAGED: "true", NODE: node, **item_labels(item), **kw.pop("labels", {})}
    return ObservedContainer(kw.pop("id", f"id-{name or item}"), name or item, state, labels, **kw)


def state(*containers: ObservedContainer, networks=()) -> ActualState:
    winners, losers = split_duplicates(networks)
    return ActualState({c.name: c for c in containers}, winners, {}, losers)


def ops(plan) -> list[tuple[str, str, str | None]]:
    return [(a.op.value, a.target, a.ref) for a in plan.actions]


def test_the_winner_is_the_oldest_by_time_not_by_text_then_the_lowest_id():
    # Docker trims the fraction's trailing zeros: as text ".5Z" sorts after ".50001Z"
    early = net("e.n", B, "2026-01-01T10:00:01.5Z", "ffff")
    late = net("e.n", A, "2026-01-01T10:00:01.50001Z", "0000")
    assert created_key(early) < created_key(late)
    winners, losers = split_duplicates([late, early])
    assert winners["e.n"] is early and losers == (late,)
    tie = net("e.n", B, "2026-01-01T10:00:01.5Z", "aaaa")
    assert split_duplicates([early, tie])[0]["e.n"] is tie  # same instant: lowest id


def test_a_node_removes_its_own_losing_duplicate_before_any_container_starts():
    n = network("e", "n")
    web = container("e", "web", networks=["e.n"])
    seen = state(
        networks=[net("e.n", B, "2026-01-01T10:00:00Z", "b1"), net("e.n", A, "2026-01-01T10:00:01Z", "a1")]
    )
    plan = compute_plan(desired([n, web], with_manifest=True), seen, node=A)
    assert ops(plan)[0] == ("remove_duplicate_network", "e.n", "a1")
    assert [o for o, *_ in ops(plan)].index("create") > 0 and plan.pending == ()
    # node b, whose network won, waits for it and never touches it
    theirs = compute_plan(desired([n, web], with_manifest=True), seen, node=B)
    assert all(a.ref != "a1" for a in theirs.actions)
    assert any(
        "node node-a created a second network" in p and "docker network rm a1" in p for p in theirs.pending
    )


def test_another_nodes_duplicate_of_a_network_not_desired_here_is_none_of_our_business():
    seen = state(
        networks=[net("e.n", B, "2026-01-01T10:00:00Z", "b1"), net("e.n", "c", "2026-01-01T10:00:01Z", "c1")]
    )
    plan = compute_plan(desired([], with_manifest=True), seen, node=A)
    assert plan.actions == () and plan.pending == () and plan.errors == ()


def test_containers_on_a_duplicate_are_moved_and_the_duplicate_waits_for_them():
    n = network("e", "n")
    web = container("e", "web", networks=["e.n"])
    on_dup = box("e.web.0", labels={DIGEST: web["digest"]}, networks={"e.n": "a1"})
    seen = state(
        on_dup,
        networks=[net("e.n", B, "2026-01-01T10:00:00Z", "b1"), net("e.n", A, "2026-01-01T10:00:01Z", "a1")],
    )
    plan = compute_plan(desired([n, web], with_manifest=True), seen, node=A)
    assert ("recreate", "e.web.0", on_dup.id) in ops(plan)
    assert not any(a.op is Op.REMOVE_DUPLICATE_NETWORK for a in plan.actions)  # it has an endpoint
    assert any("removed once node node-a's containers" in p for p in plan.pending)


def test_a_network_another_node_uses_is_left_with_a_note_and_the_plan_is_clean():
    ours = net("e.n", A, "2026-01-01T10:00:00Z", "a1")
    for users in (
        box("e.api.0", B, networks={"e.n": "a1"}),  # running on it
        box("e.api.0", B, state="exited", networks={"e.n": "a1"}),  # will start on it again
        box("e.api.0", B, state="created", networks={"e.n": ""}),  # never started: by name
    ):
        plan = compute_plan(desired([], with_manifest=True), state(users, networks=[ours]), node=A)
        assert plan.actions == () and plan.errors == () and plan.pending == ()
        assert "left while node node-b's containers use it (e.api.0)" in plan.notes[0]
    free = compute_plan(desired([], with_manifest=True), state(networks=[ours]), node=A)
    assert ops(free) == [("remove_network", "e.n", "a1")]
    # this node's own container leaves in the same pass: the network goes after it
    mine = box("e.web.0", networks={"e.n": "a1"})
    both = compute_plan(desired([], with_manifest=True), state(mine, networks=[ours]), node=A)
    assert ops(both) == [("remove", "e.web.0", mine.id), ("remove_network", "e.n", "a1")]
    # another node's network is never removed, used or not
    theirs = net("e.m", B, "2026-01-01T10:00:00Z", "b1")
    assert compute_plan(desired([], with_manifest=True), state(networks=[theirs]), node=A).actions == ()


def test_shared_daemon_names_carry_the_node_and_items_are_found_by_labels():
    web = container("e", "web", 1)
    plan = compute_plan(desired([web]), state(), node=A, shared_daemon=True)
    [create] = [a for a in plan.actions if a.op is Op.CREATE]
    assert create.target == "e.web.1" and create.name == "e.web.1.node-a"
    assert plan.names == {"e.web.1": "e.web.1.node-a"}
    running = box("e.web.1", name="e.web.1.node-a", labels={DIGEST: web["digest"]})
    assert compute_plan(desired([web]), state(running), node=A, shared_daemon=True).actions == ()
    # node b's container of the same item (a dead node's) neither blocks nor is touched
    old = box("e.web.1", B, name="e.web.1.node-b", labels={DIGEST: web["digest"]})
    moved = compute_plan(desired([web], with_manifest=True), state(old), node=A, shared_daemon=True)
    assert [(a.op, a.name) for a in moved.actions if a.op is Op.CREATE] == [(Op.CREATE, "e.web.1.node-a")]
    assert moved.errors == () and all(a.ref != old.id for a in moved.actions)


def test_a_container_named_before_the_mode_changed_is_still_the_item():
    web = container("e", "web")
    legacy = box("e.web.0", labels={DIGEST: web["digest"]})
    assert (
        compute_plan(desired([web], with_manifest=True), state(legacy), node=A, shared_daemon=True).actions
        == ()
    )
    second = box("e.web.0", name="e.web.0.node-a", labels={DIGEST: web["digest"]})
    plan = compute_plan(desired([web], with_manifest=True), state(legacy, second), node=A, shared_daemon=True)
    assert ops(plan) == [("remove", "e.web.0", legacy.id)]  # the one with the current name stays
    assert compute_plan(desired([web]), state(legacy, second), node=A, shared_daemon=True).actions == ()


def test_a_hand_labelled_container_with_an_odd_name_is_never_taken_for_the_item():
    web = container("e", "web")
    odd = box("e.web.0", name="my-web", labels={DIGEST: web["digest"]})
    plan = compute_plan(desired([web], with_manifest=True), state(odd), node=A)
    assert [a.op for a in plan.actions if a.ref == odd.id] == []
    assert any("'my-web'" in e for e in plan.errors)


def test_the_name_held_advice_is_true_in_both_modes():
    web = container("e", "web", 1)
    holder = box("e.web.1", B, labels={DIGEST: web["digest"]})
    [error] = compute_plan(desired([web]), state(holder), node=A).errors
    assert error == name_held("e.web.1", "e.web.1", B, shared_daemon=False)
    assert "node node-b's agent must remove it" in error and "docker rm -f e.web.1" in error
    assert "PHRAME_SHARED_DAEMON=true" in error and "fix the placement" not in error
    shared = name_held("e.web.1", "e.web.1.node-a", B, shared_daemon=True)
    assert "node node-b's agent must remove it" in shared and "PHRAME_SHARED_DAEMON" not in shared


def test_a_container_docker_is_restarting_is_left_to_docker():
    web = container("e", "web", restart="always")
    for docker_state in ("restarting", "running"):
        seen = box("e.web.0", state=docker_state, labels={DIGEST: web["digest"]})
        assert compute_plan(desired([web]), state(seen), node=A).actions == ()


def test_the_setting_is_a_boolean_off_by_default():
    env = {"PHRAME_NODE_NAME": "dev-1"}
    assert AgentSettings.from_env(env).shared_daemon is False
    assert AgentSettings.from_env(env | {"PHRAME_SHARED_DAEMON": "true"}).shared_daemon is True
    with pytest.raises(SettingsError, match="PHRAME_SHARED_DAEMON"):
        AgentSettings.from_env(env | {"PHRAME_SHARED_DAEMON": "sometimes"})


class Containers:
    def __init__(self, *found: ObservedContainer) -> None:
        self.found = list(found)
        self.restarted: list[str] = []

    def list_containers(self) -> list[ObservedContainer]:
        return self.found

    def restart(self, name: str) -> None:
        self.restarted.append(name)


def restart(node: str, docker: Containers, item: str) -> list[str]:
    commands = RestartCommands(Topics(), node, docker, None)
    assert commands.accept(Message(Topics().restart(node, item), restart_payload(), False))
    return commands.run()


def test_the_restart_command_finds_this_nodes_container_by_its_labels():
    mine = box("e.web.1", name="e.web.1.node-a", id="mine")
    theirs = box("e.web.1", B, name="e.web.1.node-b", id="theirs")
    docker = Containers(theirs, mine)
    assert restart(A, docker, "e.web.1") == [] and docker.restarted == ["mine"]
    only_theirs = Containers(theirs)
    assert restart(A, only_theirs, "e.web.1") == [] and only_theirs.restarted == []
