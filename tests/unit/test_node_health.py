"""The one node-health rule (schemas.node_health.judge_node): a table of cases."""

from __future__ import annotations

from typing import Any

import pytest

from schemas.node_health import NodeVerdict, judge_node

NOW, TIMEOUT = 1_000.0, 20.0
ONLINE: dict[str, Any] = {"state": "online", "converged": True}
OFFLINE: dict[str, Any] = {"state": "offline"}

CASES = [
    # (status, heard_at, status_at) -> verdict
    ("fresh heartbeat, online", ONLINE, NOW - 5, None, NodeVerdict("online", "heartbeat 5 s ago", 5.0)),
    ("fresh heartbeat, no status", None, NOW - 5, None, NodeVerdict("online", "heartbeat 5 s ago", 5.0)),
    ("exactly the timeout is still online", ONLINE, NOW - 20, None, NodeVerdict("online", "heartbeat 20 s ago", 20.0)),
    ("stale heartbeat, status online", ONLINE, NOW - 45, None,
     NodeVerdict("offline", "no heartbeat for 45 s", 45.0, NOW - 25)),
    ("stale heartbeat, no status", None, NOW - 45, None,
     NodeVerdict("offline", "no heartbeat for 45 s", 45.0, NOW - 25)),
    ("the will, fresh heartbeat before it", OFFLINE, NOW - 5, NOW - 2,
     NodeVerdict("offline", "its status says offline", 5.0, NOW - 2)),
    ("the will, heartbeat at the same moment", OFFLINE, NOW - 2, NOW - 2,
     NodeVerdict("offline", "its status says offline", 2.0, NOW - 2)),
    ("the will, a heartbeat after it: back", OFFLINE, NOW - 1, NOW - 2, NodeVerdict("online", "heartbeat 1 s ago", 1.0)),
    ("the will, receive time unknown (one-shot reader)", OFFLINE, NOW - 1, None,
     NodeVerdict("offline", "its status says offline", 1.0, None)),
    ("the will and a stale heartbeat: offline since the earlier", OFFLINE, NOW - 45, NOW - 10,
     NodeVerdict("offline", "no heartbeat for 45 s", 45.0, NOW - 25)),
    ("the will before the heartbeat went stale", OFFLINE, NOW - 45, NOW - 44,
     NodeVerdict("offline", "no heartbeat for 45 s", 45.0, NOW - 44)),
    ("never heard, status online", ONLINE, None, None, NodeVerdict("unknown", "no heartbeat heard yet")),
    ("never heard, nothing at all", None, None, None, NodeVerdict("unknown", "no heartbeat heard yet")),
    ("never heard, the will", OFFLINE, None, NOW - 3, NodeVerdict("offline", "its status says offline", None, NOW - 3)),
    ("a heartbeat from the future (skew) is age 0", ONLINE, NOW + 30, None, NodeVerdict("online", "heartbeat 0 s ago", 0.0)),
]  # fmt: skip


@pytest.mark.parametrize(
    ("status", "heard_at", "status_at", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_judge_node(
    status: dict[str, Any] | None, heard_at: float | None, status_at: float | None, expected: NodeVerdict
) -> None:
    assert judge_node(status, heard_at, NOW, TIMEOUT, status_at=status_at) == expected


def test_only_online_is_online() -> None:
    assert judge_node(ONLINE, NOW, NOW, TIMEOUT).is_online
    assert not judge_node(ONLINE, None, NOW, TIMEOUT).is_online
    assert not judge_node(OFFLINE, NOW, NOW, TIMEOUT).is_online
