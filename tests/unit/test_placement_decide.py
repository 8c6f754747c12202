"""The placement decision (phrame.placement_rules.decide): labels, capacity, spread, stickiness, node
loss and return, cordon, infeasible replicas, determinism. Pure: no git, no broker."""

from __future__ import annotations

from typing import Any

from phrame.placement_rules.decide import decide
from phrame.placement_rules.models import Decision, NodeHealth, NodeInfo, ServiceSpec, Usage

GI = 2**30
ALIVE = NodeHealth(alive=True)
NOW = 1_000_000.0


def node(name: str, role: str = "edge", cpus: float = 8, mem: int = 16, **kw: Any) -> NodeInfo:
    return NodeInfo(name, {"role": role}, cpus=cpus, memory=mem * GI, **kw)


def svc(
    name: str, replicas: int = 1, role: str = "edge", cpus: float = 1, mem: int = 1, **kw: Any
) -> ServiceSpec:
    return ServiceSpec(name, replicas, labels={"role": role}, cpus=cpus, memory=mem * GI, **kw)


def offline(seconds: float) -> NodeHealth:
    return NodeHealth(alive=False, offline_since=NOW - seconds)


def run(
    nodes: list[NodeInfo],
    services: list[ServiceSpec],
    current: dict[str, Any] | None = None,
    health: dict[str, NodeHealth] | None = None,
    reserved: dict[str, Usage] | None = None,
) -> Decision:
    states = {n.name: ALIVE for n in nodes} | (health or {})
    return decide(
        "lab",
        nodes={n.name: n for n in nodes},
        services=services,
        current=current,
        health=states,
        now=NOW,
        reschedule_after=60,
        reserved=reserved,
    )


def doc(**assignments: list[str | None]) -> dict[str, Any]:
    return {
        "schema": "phrame.placement/v1",
        "environment": "lab",
        "assignments": assignments,
        "reasons": {k: "earlier decision" for k in assignments},
    }


EDGES = [node("edge-01"), node("edge-02"), node("edge-03"), node("core-01", role="core", cpus=16, mem=64)]


def test_initial_placement_respects_labels() -> None:
    d = run(EDGES, [svc("egress", role="core"), svc("mixer", 2, spread=True)])
    assert d.doc["assignments"]["egress"] == ["core-01"]
    assert all(n.startswith("edge-") for n in d.doc["assignments"]["mixer"])
    assert d.is_changed
    assert {(m.replica, m.source, m.cause) for m in d.moves} == {
        ("egress.0", None, "new replica"),
        ("mixer.0", None, "new replica"),
        ("mixer.1", None, "new replica"),
    }
    assert d.doc["schema"] == "phrame.placement/v1" and d.doc["environment"] == "lab"
    assert "least loaded node matching role=edge" in d.doc["reasons"]["mixer"]


def test_spread_puts_replicas_on_distinct_nodes() -> None:
    d = run(EDGES, [svc("mixer", 3, spread=True, cpus=0.1)])
    assert sorted(d.doc["assignments"]["mixer"]) == ["edge-01", "edge-02", "edge-03"]


def test_spread_with_too_few_nodes_leaves_a_replica_unassigned_with_reason() -> None:
    d = run(EDGES, [svc("mixer", 4, spread=True)])
    row = d.doc["assignments"]["mixer"]
    assert row[:3] != [None] * 3 and row[3] is None
    assert [(u.service, u.index) for u in d.unassigned] == [("mixer", 3)]
    assert "already runs a replica (spread)" in d.unassigned[0].reason
    assert "mixer.3 unassigned" in d.doc["reasons"]["mixer"]


def test_without_spread_replicas_may_share_the_least_loaded_node() -> None:
    d = run([node("edge-01")], [svc("worker", 3)])
    assert d.doc["assignments"]["worker"] == ["edge-01"] * 3


def test_capacity_is_never_exceeded_counting_pins_and_kept_replicas() -> None:
    nodes = [node("edge-01", cpus=4), node("edge-02", cpus=4)]
    pinned = ServiceSpec("input", 1, pin="edge-01", cpus=3, memory=GI)
    kept = svc("kept", cpus=3)
    d = run(nodes, [pinned, kept, svc("big", cpus=2)], current=doc(kept=["edge-02"]))
    # edge-01 has 1 CPU left after the pin, edge-02 has 1 after the kept replica
    assert d.doc["assignments"]["kept"] == ["edge-02"]
    assert d.doc["assignments"]["big"] == [None]
    assert "lacks capacity" in d.unassigned[0].reason


def test_memory_capacity_and_other_environments_reservations_count() -> None:
    nodes = [node("edge-01", mem=8), node("edge-02", mem=8)]
    d = run(nodes, [svc("db", mem=6)], reserved={"edge-01": Usage(0, 4 * GI)})
    assert d.doc["assignments"]["db"] == ["edge-02"]


def test_least_loaded_node_wins() -> None:
    nodes = [node("edge-01"), node("edge-02"), node("edge-03")]
    current = doc(a=["edge-01"], b=["edge-02"])
    d = run(nodes, [svc("a", cpus=4), svc("b", cpus=2), svc("c", cpus=1)], current=current)
    assert d.doc["assignments"]["c"] == ["edge-03"]
    d = run(nodes[:2], [svc("a", cpus=4), svc("b", cpus=2), svc("c", cpus=1)], current=current)
    assert d.doc["assignments"]["c"] == ["edge-02"]


def test_rerun_on_its_own_output_is_a_fixed_point() -> None:
    services = [svc("egress", role="core"), svc("mixer", 2, spread=True), svc("w", 5)]
    first = run(EDGES, services)
    second = run(EDGES, services, current=first.doc)
    assert second.doc == first.doc
    assert not second.is_changed and second.moves == ()


def test_decision_is_deterministic_and_independent_of_input_order() -> None:
    services = [svc(f"s{i}", 2, spread=i % 2 == 0, cpus=0.5) for i in range(12)]
    a = run(EDGES, services)
    b = run(list(reversed(EDGES)), list(reversed(services)))
    assert a.doc == b.doc


def test_node_offline_within_grace_keeps_its_replicas_as_pending() -> None:
    current = doc(mixer=["edge-01", "edge-02"])
    d = run(EDGES, [svc("mixer", 2, spread=True)], current=current, health={"edge-02": offline(59)})
    assert d.doc["assignments"]["mixer"] == ["edge-01", "edge-02"]
    assert not d.is_changed and d.moves == ()
    assert [(p.node, round(p.moves_in_s)) for p in d.pending] == [("edge-02", 1)]


def test_node_loss_after_grace_moves_only_its_replicas() -> None:
    current = doc(mixer=["edge-01", "edge-02"], other=["edge-02"], calm=["edge-03"])
    services = [svc("mixer", 2, spread=True), svc("other"), svc("calm")]
    d = run(EDGES, services, current=current, health={"edge-02": offline(75)})
    rows = d.doc["assignments"]
    assert rows["mixer"][0] == "edge-01" and rows["mixer"][1] not in ("edge-01", "edge-02")
    assert rows["other"][0] != "edge-02"
    assert rows["calm"] == ["edge-03"]
    assert d.is_changed
    assert sorted(m.describe() for m in d.moves) == sorted(
        [
            f"edge-02 offline for 75 s: mixer.1 edge-02 → {rows['mixer'][1]}",
            f"edge-02 offline for 75 s: other.0 edge-02 → {rows['other'][0]}",
        ]
    )
    assert d.doc["reasons"]["calm"] == "earlier decision"
    assert "offline for 75 s" in d.doc["reasons"]["mixer"]
    msg = d.commit_message("lab")
    assert msg.startswith("placement lab: 2 replica moves") and "mixer.1 edge-02 →" in msg


def test_returning_node_gets_nothing_back() -> None:
    current = doc(mixer=["edge-01", "edge-02"])
    lost = run(EDGES, [svc("mixer", 2, spread=True)], current=current, health={"edge-02": offline(75)})
    back = run(EDGES, [svc("mixer", 2, spread=True)], current=lost.doc)  # edge-02 alive again
    assert back.doc == lost.doc and not back.is_changed
    assert "edge-02" not in back.doc["assignments"]["mixer"]


def test_offline_node_is_not_chosen_for_new_replicas() -> None:
    d = run(EDGES, [svc("mixer", 2, spread=True)], health={"edge-01": offline(1), "edge-02": offline(500)})
    assert d.doc["assignments"]["mixer"] == ["edge-03", None]
    assert "edge-01 offline for 1 s" in d.unassigned[0].reason


def test_cordon_drains_only_that_node() -> None:
    nodes = [node("edge-01"), node("edge-02", cordoned=True), node("edge-03")]
    current = doc(a=["edge-02"], b=["edge-01"])
    d = run(nodes, [svc("a"), svc("b")], current=current)
    assert d.doc["assignments"]["a"] in (["edge-03"], ["edge-01"])
    assert d.doc["assignments"]["b"] == ["edge-01"]
    assert [m.describe() for m in d.moves] == [
        f"edge-02 cordoned: a.0 edge-02 → {d.doc['assignments']['a'][0]}"
    ]


def test_cordoned_node_with_no_alternative_leaves_the_replica_unassigned() -> None:
    d = run([node("edge-01", cordoned=True)], [svc("a")], current=doc(a=["edge-01"]))
    assert d.doc["assignments"]["a"] == [None]
    assert d.is_changed and d.moves[0].target is None
    assert "edge-01 cordoned" in d.unassigned[0].reason


def test_label_change_and_removed_node_move_the_replica() -> None:
    nodes = [node("edge-01", role="core"), node("edge-03")]
    d = run(nodes, [svc("a"), svc("b")], current=doc(a=["edge-01"], b=["gone-01"]))
    causes = {m.replica: m.cause for m in d.moves}
    assert causes == {
        "a.0": "edge-01 no longer matches role=edge",
        "b.0": "gone-01 removed from the inventory",
    }
    assert d.doc["assignments"] == {"a": ["edge-03"], "b": ["edge-03"]}


def test_infeasible_never_places_on_an_unfit_node() -> None:
    d = run(EDGES, [svc("huge", cpus=32), svc("nowhere", role="gpu")])
    assert d.doc["assignments"] == {"huge": [None], "nowhere": [None]}
    reasons = {u.service: u.reason for u in d.unassigned}
    assert "no node matches role=gpu" in reasons["nowhere"]
    assert "lacks capacity" in reasons["huge"] and "32 CPUs" in reasons["huge"]


def test_still_unassigned_replica_keeps_its_reason_and_causes_no_change() -> None:
    first = run(EDGES, [svc("nowhere", role="gpu")])
    again = run(EDGES, [svc("nowhere", role="gpu")], current=first.doc)
    assert not again.is_changed and again.moves == ()
    assert len(again.unassigned) == 1  # still reported, just not re-committed


def test_unassigned_replica_is_placed_once_a_node_fits() -> None:
    first = run([node("edge-01", cordoned=True)], [svc("a")])
    fixed = run([node("edge-01")], [svc("a")], current=first.doc)
    assert fixed.doc["assignments"]["a"] == ["edge-01"]
    assert fixed.moves[0].describe() == "was unassigned: a.0 (unassigned) → edge-01"


def test_scale_down_and_removed_services() -> None:
    current = doc(a=["edge-01", "edge-02", "edge-03"], gone=["edge-01"])
    d = run(EDGES, [svc("a", 1)], current=current)
    assert d.doc["assignments"] == {"a": ["edge-01"]}
    assert sorted(m.describe() for m in d.moves) == [
        "gone is no longer label-placed: gone.0 edge-01 → (removed)",
        "scaled down to 1: a.1 edge-02 → (removed)",
        "scaled down to 1: a.2 edge-03 → (removed)",
    ]


def test_scale_up_keeps_existing_replicas() -> None:
    d = run(EDGES, [svc("a", 3, spread=True)], current=doc(a=["edge-02"]))
    row = d.doc["assignments"]["a"]
    assert row[0] == "edge-02" and len(set(row)) == 3
    assert [m.replica for m in d.moves] == ["a.1", "a.2"]


def test_two_replicas_of_a_spread_service_on_one_node_are_separated() -> None:
    d = run(EDGES, [svc("mixer", 2, spread=True)], current=doc(mixer=["edge-01", "edge-01"]))
    row = d.doc["assignments"]["mixer"]
    assert row[0] == "edge-01" and row[1] not in (None, "edge-01")
    assert d.moves[0].cause == "mixer.0 is also on edge-01 (spread)"


def test_unknown_liveness_keeps_replicas_but_places_nothing_new() -> None:
    d = decide(
        "lab",
        nodes={n.name: n for n in EDGES},
        services=[svc("a"), svc("b")],
        current=doc(a=["edge-01"]),
        health={"core-01": ALIVE},  # the edges not heard from yet
        now=NOW,
        reschedule_after=60,
    )
    assert d.doc["assignments"] == {"a": ["edge-01"], "b": [None]} and d.held is None


def test_full_disruption_moves_nothing_and_says_so() -> None:
    """No node alive at all (the reviewer's broker outage, seen as every node offline long
    past the grace period): node.json is kept as it is, not rewritten as all unassigned."""
    current = doc(mixer=["edge-01", "edge-02"], egress=["core-01"])
    gone = {n.name: offline(3600) for n in EDGES}
    services = [svc("mixer", 2, spread=True), svc("egress", role="core"), svc("new")]
    d = run(EDGES, services, current=current, health=gone)
    assert not d.is_changed and d.moves == () and d.unassigned == ()
    assert d.doc["assignments"] == current["assignments"] and d.doc["reasons"] == current["reasons"]
    assert d.held is not None and "no node of the inventory is alive (4 nodes)" in d.held
    # no node.json yet and nobody heard from: nothing is written either
    first = decide(
        "lab",
        nodes={n.name: n for n in EDGES},
        services=services,
        current=None,
        health={},
        now=NOW,
        reschedule_after=60,
    )
    assert not first.is_changed and first.held is not None
    # one node alive is no longer a full disruption: the offline nodes' replicas move
    some = run(EDGES, services, current=current, health=gone | {"edge-03": ALIVE, "core-01": ALIVE})
    assert some.held is None and some.is_changed
    assert some.doc["assignments"]["mixer"] == ["edge-03", None]


def test_no_label_placed_services_and_no_node_json_is_no_change() -> None:
    d = run(EDGES, [ServiceSpec("pinned", 1, pin="edge-01")])
    assert not d.is_changed and d.doc["assignments"] == {}


def test_a_lost_spread_shard_leaves_each_of_its_replicas_unassigned_with_the_same_reason() -> None:
    """Once no node can take a replica of a service nothing changes before its next one, so
    every later replica is unassigned with the reason the first was given (asked once: a lost
    shard of 1,000 nodes asked every node why, once per replica)."""
    nodes = [node(f"edge-{i:02d}") for i in range(8)]
    current = doc(agent=[n.name for n in nodes])
    lost = {n.name: offline(120) for n in nodes[2:]}
    d = run(nodes, [svc("agent", replicas=8, spread=True)], current, health=lost)
    assert d.doc["assignments"]["agent"] == ["edge-00", "edge-01", *[None] * 6]
    assert [(u.service, u.index) for u in d.unassigned] == [("agent", i) for i in range(2, 8)]
    reasons = {u.reason for u in d.unassigned}
    assert len(reasons) == 1
    (reason,) = reasons
    assert "edge-00 already runs a replica (spread)" in reason and "edge-02 offline" in reason
