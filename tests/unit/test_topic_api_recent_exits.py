"""A container that died and runs again: ``recent_exit`` on its item within the window only."""

from __future__ import annotations

from datetime import UTC, datetime

from schemas.container_exits import docker_time, recent_exit
from topic_api.drift import node_items
from topic_api.nodes import Receipts, node_summary
from topic_api.planes import NodeTopics

D1 = "sha256:" + "1" * 64
KILLED = "2026-12-01T17:00:00.250000000Z"
T0 = datetime(2026, 12, 1, 17, 0, 0, 250000, tzinfo=UTC).timestamp()


def actual(finished: str | None = KILLED, *, state: str = "running", code: int | None = 137) -> dict:
    last = {"exit_code": code, "finished_at": KILLED, "restarted_by": "agent"} if code is not None else None
    return {"state": state, "digest": D1, "finished_at": finished, "last_exit": last, "agent_restarts": 1}


def items(a: dict, now: float, window: float = 600.0) -> list[dict]:
    desired = {("containers", "prod.web.0"): {"image": "web:1", "digest": D1}}
    return node_items(
        desired, {("containers", "prod.web.0"): a}, None, pending=False, now=now, recent_exit_s=window
    )


def test_docker_time_reads_nanoseconds_and_the_zero_time_is_none() -> None:
    assert docker_time(KILLED) == T0
    assert docker_time("0001-01-01T00:00:00Z") is None
    assert docker_time("yesterday") is None and docker_time(None) is None and docker_time(5) is None


def test_within_the_window_the_item_says_so_and_stays_in_sync() -> None:
    (item,) = items(actual(), now=T0 + 12.5)
    assert item["status"] == "in-sync"
    assert item["recent_exit"] == {
        "exit_code": 137,
        "finished_at": KILLED,
        "age_s": 12.5,
        "restarted_by": "agent",
    }


def test_after_the_window_or_while_down_there_is_none() -> None:
    assert items(actual(), now=T0 + 600.5)[0]["recent_exit"] is None
    assert items(actual(), now=T0 + 30, window=20)[0]["recent_exit"] is None
    assert items(actual(state="exited"), now=T0 + 1)[0]["recent_exit"] is None  # it is down: failed
    assert items(actual(None), now=T0 + 1)[0]["recent_exit"] is None  # never exited


def test_an_exit_the_agent_did_not_see_has_no_exit_code() -> None:
    """Docker restarted it by its policy (or someone started it): FinishedAt moved on."""
    later = "2026-12-01T17:05:00Z"
    view = recent_exit(actual(later), now=T0 + 301, window_s=600)
    assert view is not None and view["exit_code"] is None and view["restarted_by"] is None
    assert view["age_s"] == 1.25  # T0 + 301 is 17:05:01.25


def test_a_clock_behind_the_node_gives_age_zero_not_negative() -> None:
    assert items(actual(), now=T0 - 3)[0]["recent_exit"]["age_s"] == 0.0


def test_the_node_summary_counts_recent_exits() -> None:
    d = NodeTopics(items={("containers", "prod.web.0"): {"image": "web:1", "digest": D1}})
    a = NodeTopics(items={("containers", "prod.web.0"): actual(), ("containers", "prod.db.0"): actual(None)})
    view = node_summary("n1", d, a, Receipts(), now=T0 + 5, timeout_s=20.0, recent_exit_s=600.0)
    assert view["recent_exits"] == 1
    assert node_summary("n1", d, a, Receipts(), now=T0 + 700, timeout_s=20.0)["recent_exits"] == 0
