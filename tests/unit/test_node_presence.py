"""``disconnected`` apart from ``offline`` (schemas.node_health.presence): silent without a
goodbye and within the disconnect grace, against said it stopped or silent for longer."""

from __future__ import annotations

import pytest

from schemas.node_health import judge_node, presence

TIMEOUT, GRACE = 20.0, 300.0
ONLINE = {"state": "online"}
WILL = {"state": "offline", "agent": "node-agent", "reason": "lost"}
STOPPED = {"state": "offline", "agent": "node-agent", "reason": "stopped"}
OLD_AGENT = {"state": "offline", "agent": "node-agent"}


def at(status, now: float, *, heard_at: float = 0.0, status_at: float | None = None, grace=GRACE):
    verdict = judge_node(status, heard_at, now, TIMEOUT, status_at=status_at)
    return verdict.state, presence(verdict, status, now, grace)


def test_online_and_unknown_keep_their_names() -> None:
    assert at(ONLINE, 5.0) == ("online", "online")
    never = judge_node(None, None, 5.0, TIMEOUT)
    assert presence(never, None, 5.0, GRACE) == "unknown"


def test_a_heartbeat_timeout_while_online_is_disconnected_until_the_grace_ends() -> None:
    # offline since heard_at + TIMEOUT = 20 s
    assert at(ONLINE, 25.0) == ("offline", "disconnected")
    assert at(ONLINE, 20.0 + GRACE - 1) == ("offline", "disconnected")
    assert at(ONLINE, 20.0 + GRACE + 1) == ("offline", "offline")


def test_the_last_will_is_disconnected_and_a_clean_stop_is_offline() -> None:
    assert at(WILL, 3.0, status_at=2.0) == ("offline", "disconnected")
    assert at(WILL, 2.0 + GRACE + 1, status_at=2.0) == ("offline", "offline")
    assert at(STOPPED, 3.0, status_at=2.0) == ("offline", "offline")
    assert at(OLD_AGENT, 3.0, status_at=2.0) == ("offline", "offline")  # says nothing: as before


@pytest.mark.parametrize("grace", [None, 0.0])
def test_without_a_known_grace_a_silent_node_is_offline(grace) -> None:
    assert at(ONLINE, 25.0, grace=grace) == ("offline", "offline")
