"""Leaving a full disruption (placement.health.PlacementHealth.note_decision before the decision):
when the first node is heard again after a pass found none alive, every node gets a whole
timeout from then, so the nodes still reconnecting do not lose their replicas to the first
node back; a node silent before the disruption began stays offline. Fake clock, no broker."""

from __future__ import annotations

from phrame.placement_rules.decide import decide
from phrame.placement_rules.models import Decision, NodeHealth
from placement.health import PlacementHealth
from tests.support.actual import heartbeat, placement_health
from tests.unit.test_placement_decide import EDGES, doc, node, svc

T0 = 1_000_000.0
TIMEOUT, GRACE = 20, 60
NODES = {n.name: n for n in [*EDGES, node("edge-04")]}
SERVICES = [svc("mixer"), svc("probe"), svc("meter")]


def fleet() -> PlacementHealth:
    """Every node heard at T0, except edge-04: silent since T0 - 45, offline before it began."""
    live = placement_health(timeout_s=TIMEOUT, started_at=T0 - 100)
    for name in NODES:
        at = T0 - 45 if name == "edge-04" else T0
        heartbeat(live, name, at, received_at=at, is_retained=False)
    return live


def beat(live: PlacementHealth, now: float, *names: str) -> None:
    for name in names:
        heartbeat(live, name, now, received_at=now, is_retained=False)


def noted_health(live: PlacementHealth, scope: str, nodes: list[str], now: float) -> dict[str, NodeHealth]:
    """What the reconciler does before each decision: note it, then read the health."""
    live.note_decision(scope, nodes, now)
    return live.health(nodes, now)


def run(live: PlacementHealth, now: float, current: dict[str, object], scope: str = "lab") -> Decision:
    health = noted_health(live, scope, list(NODES), now)
    return decide(
        "lab",
        nodes=NODES,
        services=SERVICES,
        current=current,
        health=health,
        now=now,
        reschedule_after=GRACE,
    )


def test_the_first_node_back_after_a_full_disruption_takes_nobody_s_replicas() -> None:
    live = fleet()
    current = doc(mixer=["edge-02"], probe=["edge-03"], meter=["edge-01"])
    # the broker loses every edge site for 2 minutes while placement stays connected: held
    held = run(live, T0 + 120, current)
    assert held.held is not None and not held.is_changed
    # the link heals; edge-01's agent is back 1 s before the others (reconnect backoff)
    beat(live, T0 + 121, "edge-01")
    back = run(live, T0 + 121, current)
    assert back.held is None and not back.is_changed and back.moves == ()
    assert back.pending == ()  # edge-02, edge-03, core-01: a whole timeout from T0 + 121
    health = live.health(list(NODES), T0 + 121)
    assert health["edge-02"].alive and health["core-01"].alive
    assert not health["edge-04"].alive  # silent for 45 s when the disruption began: still offline

    # edge-02 and core-01 are back within their timeout; edge-03 never returns
    beat(live, T0 + 130, "edge-02", "core-01")
    beat(live, T0 + 200, "edge-01", "edge-02", "core-01")
    edge03 = live.health(["edge-03"], T0 + 201)["edge-03"]
    assert edge03.offline_since == T0 + 121 + TIMEOUT
    waiting = run(live, T0 + 121 + TIMEOUT + GRACE, current)
    assert not waiting.is_changed and [p.node for p in waiting.pending] == ["edge-03"]
    moved = run(live, T0 + 121 + TIMEOUT + GRACE + 1, current)
    assert moved.is_changed and [m.describe() for m in moved.moves] == [
        "edge-03 offline for 61 s: probe.0 edge-03 → edge-02"  # never edge-04: it is offline
    ]
    assert moved.doc["assignments"] == {"meter": ["edge-01"], "mixer": ["edge-02"], "probe": ["edge-02"]}


def test_a_decision_with_live_nodes_never_restarts_the_grace_period() -> None:
    """Only the end of a disruption resumes liveness: an ordinary pass does not, nor does a
    scope whose own inventory is all offline (a ref listing only dead nodes) alternating
    with one whose nodes are alive, which would otherwise restart the grace every pass."""
    live = fleet()
    for step in range(1, 20):
        now = T0 + 10 * step
        beat(live, now, "edge-01", "edge-02", "core-01")  # edge-03 died at T0
        assert noted_health(live, "old-ref", ["edge-04"], now)["edge-04"].alive is False
        assert noted_health(live, "lab", list(NODES), now)["edge-01"].alive
    assert live.health(["edge-03"], T0 + 190)["edge-03"] == NodeHealth(False, T0 + TIMEOUT)
    edge04 = noted_health(live, "old-ref", ["edge-04"], T0 + 200)["edge-04"]
    assert edge04.offline_since == T0 - 25  # its own scope is still in disruption: untouched


def test_a_node_that_never_answered_gets_a_timeout_from_the_end_of_the_disruption() -> None:
    live = placement_health(timeout_s=TIMEOUT, started_at=T0)  # started during the disruption
    current = doc(mixer=["edge-02"], probe=["edge-01"], meter=["edge-01"])
    assert run(live, T0 + 100, current).held is not None
    beat(live, T0 + 101, "edge-01")
    back = run(live, T0 + 101, current)
    assert back.held is None and not back.is_changed and back.moves == ()
    assert [p.to_dict() for p in back.pending] == [
        {"replica": "mixer.0", "node": "edge-02", "offline_for_s": 0.0, "moves_in_s": TIMEOUT + GRACE}
    ]


def test_noting_a_decision_judges_nodes_only_until_one_is_alive() -> None:
    live = fleet()
    judged: list[str] = []
    verdict = live.view.verdict

    def counted(node: str, now: float | None = None):  # type: ignore[no-untyped-def]
        judged.append(node)
        return verdict(node, now)

    live.view.verdict = counted  # type: ignore[method-assign]
    live.note_decision("lab", ["edge-04", *NODES], T0 + 1)  # edge-04 is offline, the next one alive
    assert judged == ["edge-04", "edge-01"]
