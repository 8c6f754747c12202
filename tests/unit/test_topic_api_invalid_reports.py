"""A report the mirror refused (listed under the snapshot's ``invalid``) reaches only its
sender's row, with the reason, until a good report from it replaces it."""

from __future__ import annotations

from typing import Any

from topic_api.nodes import Receipts, node_summary
from topic_api.state import ApiState, Notice

HB = "phrame/actual/nodes/{}/heartbeat"
HOST = dict.fromkeys(["cpu_percent", "load1", "mem_total", "mem_used", "disk_total", "disk_used"], 1.0)
GOOD = {"ts": 100.0, "seq": 1, "interval_s": 5, "host": HOST}


def snapshot(messages: int, topics: dict[str, Any], invalid: dict[str, Any]) -> dict[str, Any]:
    return {"generated_at": "2026-01-01T00:00:00+00:00", "messages": messages, "instance": "run1",
            "topics": topics, "invalid": invalid}  # fmt: skip


def row(state: ApiState, node: str) -> dict[str, Any]:
    actual = state.planes["actual"].index.nodes.get(node)
    receipts = Receipts(state.view.verdict(node, 101.0))
    return dict(node_summary(node, None, actual, receipts, now=101.0, timeout_s=20))


def test_a_refused_report_is_named_in_its_senders_row_only() -> None:
    state = ApiState("phrame")
    why = {"error": "not JSON: NaN is not JSON (only finite numbers are)", "raw": '{"ts": NaN}'}
    state.apply("actual", snapshot(2, {HB.format("a"): GOOD}, {HB.format("b"): why}), 100.0)
    assert state.node_names() == ["a", "b"]
    a, b = row(state, "a"), row(state, "b")
    assert a["online"] and a["errors"] == [] and "invalid" not in a["reason"]
    assert not b["online"]
    assert b["errors"] == [f"invalid report at {HB.format('b')}: {why['error']}"]
    assert b["reason"].startswith(f"invalid report at {HB.format('b')}: not JSON: NaN")
    # a good report told by notice replaces the refused one at once
    state.apply_notices("actual", "run1", [Notice(3, HB.format("b"), GOOD)], 100.5)
    assert row(state, "b")["errors"] == [] and row(state, "b")["online"]


def test_a_refused_report_cleared_by_its_sender_leaves_the_row() -> None:
    state = ApiState("phrame")
    why = {"error": "not JSON: JSON nested too deeply (more than 64 levels)", "raw": "[[[["}
    state.apply("actual", snapshot(2, {HB.format("a"): GOOD}, {HB.format("b"): why}), 100.0)
    change = state.apply_notices("actual", "run1", [Notice(3, HB.format("b"), cleared=True)], 100.5)
    assert change is not None and change["removed"] == [HB.format("b")]
    assert state.node_names() == ["a"]


def test_odd_invalid_entries_do_not_break_the_snapshot() -> None:
    state = ApiState("phrame")
    odd = {HB.format("c"): "text", "elsewhere/x": {"error": 3}, "phrame/actual/nodes/": {}}
    state.apply("actual", snapshot(1, {HB.format("a"): GOOD}, odd), 100.0)
    assert state.node_names() == ["a", "c"]
    assert row(state, "c")["errors"] == [f"invalid report at {HB.format('c')}: refused by the mirror"]
