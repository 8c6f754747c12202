"""Node summaries, environment views and the state's change events, from realistic payloads."""

from __future__ import annotations

from topic_api.environments import environment_view
from topic_api.nodes import Receipts, node_summary
from topic_api.planes import EnvTopics, index_plane
from topic_api.state import MAX_LISTED, ApiState

D1 = "sha256:" + "1" * 64
C1, C2 = "a" * 40, "b" * 40
HOST = {
    "cpu_percent": 12.5,
    "load1": 0.4,
    "mem_total": 8e9,
    "mem_used": 2e9,
    "disk_total": 1e11,
    "disk_used": 4e10,
}


def desired_doc() -> dict:
    return {
        "generated_at": 100.0,
        "topics": {
            "phrame/desired/nodes/n1/manifest": {
                "generation": 2,
                "commit": C2,
                "items": {"containers/prod.web.0": D1},
            },
            "phrame/desired/nodes/n1/containers/prod.web.0": {"image": "web:1", "digest": D1, "commit": C2},
            "phrame/desired/environments/prod/sync": {
                "environment": "prod",
                "ref": "main",
                "ok": False,
                "commit": C2,
                "errors": [
                    {
                        "file": "environments/prod/services/web.yaml",
                        "line": 3,
                        "column": 1,
                        "rule": "schema",
                        "message": "bad",
                    }
                ],
            },
            "phrame/desired/environments/prod/services/web": {"name": "web", "image": "web:1"},
            "phrame/desired/environments/prod/deploys": {
                "environment": "prod",
                "deploys": [{"commit": C2, "state": "converged"}],
            },
        },
    }


def actual_doc(ts: float = 1000.0, generation: int = 1) -> dict:
    return {
        "generated_at": ts,
        "topics": {
            "phrame/actual/nodes/n1/status": {
                "state": "online",
                "generation": generation,
                "commit": C1,
                "converged": True,
                "errors": ["x failed"],
            },
            "phrame/actual/nodes/n1/heartbeat": {"ts": ts, "seq": int(ts), "interval_s": 5, "host": HOST},
            "phrame/actual/nodes/n1/containers/prod.web.0": {"state": "running", "digest": D1},
        },
    }


def test_node_summary_from_a_state() -> None:
    state = ApiState("phrame")
    state.apply("desired", desired_doc(), 1000.0)
    state.apply("actual", actual_doc(), 1001.0)
    d, a = state.planes["desired"].index.nodes["n1"], state.planes["actual"].index.nodes["n1"]
    receipts = Receipts(state.view.verdict("n1", 1002.0), state.history.of("n1", 1002.0))
    view = node_summary("n1", d, a, receipts, now=1002.0, timeout_s=20.0)
    assert view["state"] == "online" and view["online"] is True
    assert view["heartbeat_age_s"] == 2.0  # first read: counted from the heartbeat's own ts
    assert view["host"] == HOST
    assert view["generation"] == {"desired": 2, "applied": 1}
    assert view["commit"] == {"desired": C2, "applied": C1}
    assert view["drift"] == 0  # the item's digest matches, although the node is behind
    assert view["errors"] == ["x failed"]
    assert view["counts"] == {"containers": 1, "networks": 0, "processes": 0}
    assert [h["ts"] for h in view["history"]] == [1000.0]
    late = node_summary("n1", d, a, Receipts(state.view.verdict("n1", 1030.0)), now=1030.0, timeout_s=20.0)
    assert late["state"] == "offline" and late["online"] is False


def test_history_keeps_ten_minutes_of_new_heartbeats_only() -> None:
    state = ApiState("phrame", history_s=600.0)
    for i in range(0, 800, 5):
        state.apply("actual", actual_doc(ts=1000.0 + i), 1000.0 + i)
    state.apply("actual", actual_doc(ts=1795.0), 1799.0)  # the same heartbeat again
    hist = state.history.of("n1", 1800.0)
    assert hist[0]["ts"] == 1200.0 and hist[-1]["ts"] == 1795.0
    assert len(hist) == 120
    facts = state.view.facts("n1")
    assert facts is not None and facts.heard_at == 1795.0  # heard when it changed, not when seen again


def test_change_events_name_changed_and_removed_topics() -> None:
    state = ApiState("phrame")
    first = state.apply("actual", actual_doc(), 1.0)
    assert first is not None and first["plane"] == "actual" and len(first["changed"]) == 3
    doc = actual_doc(ts=1005.0)
    del doc["topics"]["phrame/actual/nodes/n1/containers/prod.web.0"]
    change = state.apply("actual", doc, 2.0)
    assert change == {
        "plane": "actual",
        "generated_at": 1005.0,
        "changed": ["phrame/actual/nodes/n1/heartbeat"],
        "removed": ["phrame/actual/nodes/n1/containers/prod.web.0"],
        "truncated": False,
    }
    assert state.apply("actual", doc, 3.0) is None  # the same file again


def test_generated_at_is_unix_seconds_whatever_the_snapshot_wrote() -> None:
    state = ApiState("phrame")
    state.apply("desired", {"generated_at": "2026-12-01T16:00:00.500+00:00", "topics": {}}, 1.0)
    assert state.generated_at() == {"desired": 1796140800.5, "actual": None}


def test_a_big_change_is_truncated() -> None:
    state = ApiState("phrame")
    topics = {f"phrame/actual/nodes/n{i}/status": {"state": "online"} for i in range(MAX_LISTED + 1)}
    change = state.apply("actual", {"generated_at": 1.0, "topics": topics}, 1.0)
    assert change is not None and change["truncated"] is True and len(change["changed"]) == MAX_LISTED


def test_environment_view() -> None:
    index = index_plane(desired_doc()["topics"], "phrame", "desired")
    view = environment_view("prod", index.environments["prod"], with_services=True)
    assert view["ok"] is False and view["commit"] == C2
    assert view["errors"] == [
        {
            "file": "environments/prod/services/web.yaml",
            "line": 3,
            "column": 1,
            "rule": "schema",
            "message": "bad",
        }
    ]
    assert view["deploys"] == [{"commit": C2, "state": "converged"}]
    assert view["services"] == {"web": {"name": "web", "image": "web:1"}}
    empty = environment_view("x", EnvTopics())
    assert empty == {
        "environment": "x",
        "sync": None,
        "ok": None,
        "commit": None,
        "errors": [],
        "placement": None,
        "deploys": [],
    }


def test_history_of_a_node_whose_clock_is_ten_minutes_off_is_kept_by_receipt_time() -> None:
    """Fault case 7: the chart of a node 10 minutes behind (or ahead) is neither empty nor
    kept forever: entries age by when this API received them, on its own clock."""
    for skew in (-700.0, 700.0):
        state = ApiState("phrame", history_s=600.0)
        for i in range(0, 800, 5):
            state.apply("actual", actual_doc(ts=1000.0 + i + skew), 1000.0 + i)
        hist = state.history.of("n1", 1800.0)
        assert len(hist) == 120, (skew, len(hist))
        assert hist[0]["at"] == 1200.0 and hist[-1]["at"] == 1795.0
        assert hist[-1]["ts"] == 1795.0 + skew  # the node's own stamp, as sent


def test_the_api_judges_a_node_as_placement_does() -> None:
    """The API's verdicts are the actual view's (the rule placement and config-sync judge by),
    fed from the mirror's snapshots: a retained heartbeat dated ahead of this host's clock is
    only the node's word (unknown, not online), a will makes it offline at once, and a
    heartbeat heard after it brings it back."""
    from phrame.actual import ActualView
    from schemas import Topics

    state = ApiState("phrame", timeout_s=20.0, started_at=990.0)
    placement = ActualView(Topics("phrame"), timeout_s=20.0, started_at=990.0)
    hb = "phrame/actual/nodes/n1/heartbeat"
    st = "phrame/actual/nodes/n1/status"
    doc = actual_doc(ts=1060.0)  # its clock is a minute ahead of ours
    state.apply("actual", doc, 1000.0)
    placement.heartbeat("n1", doc["topics"][hb], retained=True, received_at=1000.0)
    placement.status("n1", doc["topics"][st], retained=True, received_at=1000.0)

    def both(now: float) -> tuple[str, str]:
        view = node_summary(
            "n1", None, None, Receipts(state.view.verdict("n1", now)), now=now, timeout_s=20.0
        )
        return view["state"], placement.verdict("n1", now).state

    assert both(1001.0) == ("unknown", "unknown")  # before: the API said online
    doc["topics"][st] = {"state": "offline"}  # its will
    state.apply("actual", doc, 1002.0)
    placement.status("n1", {"state": "offline"}, received_at=1002.0)
    assert both(1003.0) == ("offline", "offline")
    doc = actual_doc(ts=1064.0)
    doc["topics"][st] = {"state": "online"}
    state.apply("actual", doc, 1004.0)
    placement.status("n1", {"state": "online"}, received_at=1004.0)
    placement.heartbeat("n1", doc["topics"][hb], retained=False, received_at=1004.0)
    assert both(1005.0) == ("online", "online")
    assert both(1030.0) == ("offline", "offline")


def test_a_silent_node_is_disconnected_within_its_environments_grace() -> None:
    from topic_api.nodes import disconnect_grace, items_of

    state = ApiState("phrame")
    desired = desired_doc()
    desired["topics"]["phrame/desired/environments/prod/placement"] = {
        "environment": "prod",
        "disconnect_grace_s": 300,
    }
    state.apply("desired", desired, 1000.0)
    state.apply("actual", actual_doc(), 1001.0)
    d, a = state.planes["desired"].index.nodes["n1"], state.planes["actual"].index.nodes["n1"]
    envs = state.planes["desired"].index.environments
    grace = disconnect_grace(items_of(d, a), {e: envs[e].placement for e in envs})
    assert grace == 300.0
    assert disconnect_grace(items_of(d, a), {}) is None

    def at(now: float, grace_s: float | None) -> tuple[str, str]:
        view = node_summary(
            "n1",
            d,
            a,
            Receipts(state.view.verdict("n1", now)),
            now=now,
            timeout_s=20.0,
            disconnect_grace_s=grace_s,
        )
        return view["state"], view["presence"]

    assert at(1002.0, grace) == ("online", "online")
    assert at(1030.0, grace) == ("offline", "disconnected")  # silent since 1000: offline from 1020
    assert at(1330.0, grace) == ("offline", "offline")  # 310 s offline: past the grace
    assert at(1030.0, None) == ("offline", "offline")  # no grace known: as before


def test_a_clean_stop_is_offline_at_once() -> None:
    state = ApiState("phrame")
    state.apply("desired", desired_doc(), 1000.0)
    stopped = actual_doc()
    stopped["topics"]["phrame/actual/nodes/n1/status"] = {"state": "offline", "reason": "stopped"}
    state.apply("actual", stopped, 1001.0)
    d, a = state.planes["desired"].index.nodes["n1"], state.planes["actual"].index.nodes["n1"]
    view = node_summary("n1", d, a, Receipts(state.view.verdict("n1", 1002.0)), now=1002.0, timeout_s=20.0,
                        disconnect_grace_s=300.0)  # fmt: skip
    assert (view["state"], view["presence"]) == ("offline", "offline")
    will = actual_doc()
    will["topics"]["phrame/actual/nodes/n1/status"] = {"state": "offline", "reason": "lost"}
    state.apply("actual", will, 1003.0)
    a = state.planes["actual"].index.nodes["n1"]
    view = node_summary("n1", d, a, Receipts(state.view.verdict("n1", 1004.0)), now=1004.0, timeout_s=20.0,
                        disconnect_grace_s=300.0)  # fmt: skip
    assert (view["state"], view["presence"]) == ("offline", "disconnected")
