"""topic_api.state.ApiState.apply_notices: the mirrors' notices laid over the last snapshot
until a snapshot holds them (by its ``messages`` count, in the same mirror run)."""

from __future__ import annotations

from typing import Any

from topic_api.state import ApiState, Notice

A = "phrame/actual/nodes/n1/containers/e.web.0"
B = "phrame/actual/nodes/n1/containers/e.web.1"


def snapshot(messages: int, topics: dict[str, Any], instance: str | None = "run1") -> dict[str, Any]:
    return {"generated_at": f"2026-01-01T00:00:{messages:02d}+00:00", "messages": messages,
            "instance": instance, "topics": topics}  # fmt: skip


def test_a_notice_newer_than_the_snapshot_is_told_at_once_and_kept_until_a_snapshot_holds_it() -> None:
    state = ApiState("phrame")
    state.apply("actual", snapshot(2, {A: {"state": "running"}, B: {"state": "running"}}), 1.0)
    change = state.apply_notices(
        "actual", "run1", [Notice(3, A, {"state": "exited"}), Notice(4, B, cleared=True)], 2.0
    )
    assert change is not None and (change["changed"], change["removed"]) == ([A], [B])
    assert state.planes["actual"].topics == {A: {"state": "exited"}}
    # a snapshot taken before the notices (it holds 2 messages) does not take them back
    assert state.apply("actual", snapshot(2, {A: {"state": "running"}, B: {"state": "running"}}), 3.0) is None
    assert state.planes["actual"].topics == {A: {"state": "exited"}}
    # one that holds them: what it says stands from now
    state.apply("actual", snapshot(5, {A: {"state": "running"}}), 4.0)
    assert state.planes["actual"].topics == {A: {"state": "running"}} and state.pending["actual"] == {}


def test_old_repeated_or_foreign_notices_change_nothing() -> None:
    state = ApiState("phrame")
    assert (
        state.apply_notices("actual", "run1", [Notice(1, A, {"state": "exited"})], 1.0) is None
    )  # no snapshot yet
    state.apply("actual", snapshot(5, {A: {"state": "running"}}), 1.0)
    assert (
        state.apply_notices("actual", "run1", [Notice(5, A, {"state": "exited"})], 2.0) is None
    )  # held already
    assert (
        state.apply_notices("actual", "run2", [Notice(6, A, {"state": "exited"})], 2.0) is None
    )  # another run
    assert (
        state.apply_notices("actual", "run1", [Notice(6, A, {"state": "running"})], 2.0) is None
    )  # the same
    assert state.planes["actual"].topics == {A: {"state": "running"}}
    state.apply_notices(
        "actual", "run1", [Notice(8, A, {"state": "exited"}), Notice(7, A, {"state": "dead"})], 3.0
    )
    assert state.planes["actual"].topics == {A: {"state": "exited"}}  # in message order


def test_a_heartbeat_told_by_notice_counts_from_its_arrival() -> None:
    state = ApiState("phrame")
    hb = "phrame/actual/nodes/n1/heartbeat"
    state.apply("actual", snapshot(1, {hb: beat(100.0, 1)}), 100.0)
    state.apply_notices("actual", "run1", [Notice(2, hb, beat(50.0, 2))], 105.0)
    facts = state.view.facts("n1")
    assert facts is not None and facts.heard_at == 105.0


def beat(ts: float, seq: int) -> dict[str, object]:
    host = dict.fromkeys(["cpu_percent", "load1", "mem_total", "mem_used", "disk_total", "disk_used"], 1)
    return {"ts": ts, "seq": seq, "interval_s": 5, "host": host}
