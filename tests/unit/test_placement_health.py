"""Placement's reading of the actual view (placement.health): a node not online is not alive,
a node never heard (or heard only on its own clock's word) counts as offline a timeout after
placement started listening, a will from when it arrived; GC candidates. The node-level
rule itself is tested in test_actual_view. A fake clock throughout."""

from __future__ import annotations

from phrame.placement_rules.models import NodeHealth
from placement.health import PlacementHealth, gc_candidates
from tests.support.actual import heartbeat, placement_health, status

T0 = 1_000.0


def tracker() -> PlacementHealth:
    return placement_health(timeout_s=20, started_at=T0)


def test_alive_until_the_timeout_then_offline_since_last_heartbeat_plus_timeout() -> None:
    live = tracker()
    heartbeat(live, "a", T0, received_at=T0)
    assert live.health(["a"], T0 + 20)["a"] == NodeHealth(alive=True)
    late = live.health(["a"], T0 + 95)["a"]
    assert not late.alive and late.offline_since == T0 + 20 and late.offline_for(T0 + 95) == 75


def test_a_retained_heartbeat_dated_past_the_timeout_is_not_alive_but_not_long_offline() -> None:
    """A stale-looking retained copy is a dead node's or a live node's whose clock is behind:
    not alive (nothing new goes there), offline only a timeout after we started listening,
    as a node never heard, so a (re)started placement never moves the replicas of a node 10
    minutes behind on its clock's word; a first decision waits for it (unconfirmed)."""
    live = tracker()
    heartbeat(live, "behind", T0 - 600, received_at=T0 + 1, is_retained=True)
    assert live.health(["behind"], T0 + 2)["behind"] == NodeHealth(alive=False, offline_since=T0 + 20)
    assert live.view.unconfirmed(T0 + 2) == {"behind": T0 + 1 + 8.5}
    heartbeat(live, "behind", T0 - 598, received_at=T0 + 3)  # its first live beat
    assert live.health(["behind"], T0 + 4)["behind"].alive


def test_a_retained_heartbeat_counts_from_its_own_timestamp_never_later_than_arrival() -> None:
    live = tracker()
    heartbeat(live, "recent", T0 - 5, received_at=T0, is_retained=True)
    assert live.health(["recent"], T0 + 16)["recent"] == NodeHealth(alive=False, offline_since=T0 + 15)
    heartbeat(live, "future", T0 + 999, received_at=T0, is_retained=True)  # its clock's word only
    assert live.health(["future"], T0 + 21)["future"] == NodeHealth(alive=False, offline_since=T0 + 20)


def test_never_seen_node_is_offline_a_timeout_after_the_tracker_started() -> None:
    live = tracker()
    early = live.health(["ghost"], T0 + 5)["ghost"]
    assert not early.alive and early.offline_for(T0 + 5) == 0  # unknown: nothing new goes there
    assert live.health(["ghost"], T0 + 95)["ghost"].offline_for(T0 + 95) == 75
    status(live, "ghost2", "offline", received_at=T0 + 3)
    assert live.health(["ghost2"], T0 + 5)["ghost2"].offline_since == T0 + 3


def test_a_will_makes_a_node_offline_from_its_arrival() -> None:
    live = tracker()
    heartbeat(live, "a", T0, received_at=T0)
    status(live, "a", "offline", received_at=T0 + 2)
    assert live.health(["a"], T0 + 3)["a"] == NodeHealth(alive=False, offline_since=T0 + 2)


def test_gc_candidates_are_nodes_offline_longer_than_the_gc_period() -> None:
    now = T0 + 100_000
    health = {
        "old": NodeHealth(alive=False, offline_since=now - 90_000),
        "recent": NodeHealth(alive=False, offline_since=now - 60),
        "up": NodeHealth(alive=True),
    }
    assert gc_candidates(health, now, 86_400) == ["old"]
