"""Placement decides only what changed: a pass whose inputs (the commit, each node's health,
the grace) are those of the environment's last final decision decides nothing again.

At 10,000 nodes a decision takes seconds, and the loop's resync runs a pass every
``PHRAME_PLACEMENT_INTERVAL_S`` while heartbeats never stop. Real bare git remote; the
decisions are counted by the reconciler (``decisions``, ``decisions_skipped``).
"""

from __future__ import annotations

from pathlib import Path

from tests.integration.test_placement_git import Clock, ConfigRemote, beat, make


def test_a_heartbeat_of_an_unchanged_node_decides_nothing_and_a_changed_node_decides(
    tmp_path: Path,
) -> None:
    remote = ConfigRemote(tmp_path)
    clock = Clock()
    rec = make(tmp_path, remote, clock)
    assert rec.run_pass()[0].commit is not None  # the first placement: decided and committed
    rec.run_pass()  # the next pass reads its own commit: decided once more (a new commit)
    decided = rec.decisions
    placed = remote.node_json()["assignments"]

    for _ in range(3):  # every node beats on: the same inputs, no decision
        clock.now += 5
        beat(rec.liveness, clock)
        result = rec.run_pass()[0]
        assert result.error is None and result.commit is None
        assert result.decision is not None and result.decision.doc["assignments"] == placed
    assert rec.decisions == decided, "a pass with unchanged inputs decided again"
    assert rec.decisions_skipped == 3

    # edge-02 falls silent: its health changed, so the environment is decided again
    clock.now += 30
    beat(rec.liveness, clock, ("core-01", "edge-01", "edge-03"))
    result = rec.run_pass()[0]
    assert rec.decisions == decided + 1
    assert result.decision is not None and [p.node for p in result.decision.pending] == ["edge-02"]

    # a pending move is decided on every pass until it is done (its grace runs out with time)
    clock.now += 5
    beat(rec.liveness, clock, ("core-01", "edge-01", "edge-03"))
    rec.run_pass()
    assert rec.decisions == decided + 2


def test_a_new_commit_is_decided_even_when_every_node_is_unchanged(tmp_path: Path) -> None:
    remote = ConfigRemote(tmp_path, keep_node_json=True)
    clock = Clock()
    rec = make(tmp_path, remote, clock)
    rec.run_pass()
    rec.run_pass()
    decided = rec.decisions
    path = "environments/studio-a/services/mixer.yaml"
    remote.change(path, (remote.work / path).read_text().replace("replicas: 2", "replicas: 3"), "mixer: 3")
    clock.now += 5
    beat(rec.liveness, clock)
    result = rec.run_pass()[0]
    assert rec.decisions == decided + 1 and result.commit is not None
    assert len(remote.node_json()["assignments"]["mixer"]) == 3
