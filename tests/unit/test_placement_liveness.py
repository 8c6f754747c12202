"""Node liveness (placement.liveness): heartbeat age, retained vs live heartbeats, the
offline status of a last will, never-seen nodes, and GC candidates. A fake clock throughout."""

from __future__ import annotations

from phrame.placement_rules.models import NodeHealth
from placement.liveness import Liveness, gc_candidates

T0 = 1_000.0


def tracker() -> Liveness:
    return Liveness(timeout_s=20, started_at=T0)


def test_alive_until_the_timeout_then_offline_since_last_heartbeat_plus_timeout() -> None:
    live = tracker()
    live.heartbeat("a", T0, received_at=T0, is_retained=False)
    assert live.health(["a"], T0 + 20)["a"] == NodeHealth(alive=True)
    late = live.health(["a"], T0 + 95)["a"]
    assert not late.alive and late.offline_since == T0 + 20 and late.offline_for(T0 + 95) == 75


def test_live_heartbeat_counts_from_arrival_so_node_clock_skew_does_not_matter() -> None:
    live = tracker()
    live.heartbeat("a", T0 - 3600, received_at=T0, is_retained=False)  # node clock an hour behind
    assert live.health(["a"], T0 + 10)["a"].alive


def test_a_retained_heartbeat_dated_past_the_timeout_is_not_alive_but_not_long_offline() -> None:
    """Fault case 7: a stale-looking retained copy is a dead node's or a live node's whose
    clock is behind: not alive (nothing new goes there), offline only a timeout after we
    started listening, as a node never heard, so a (re)started placement never moves the
    replicas of a node 10 minutes behind on its clock's word."""
    live = tracker()
    live.heartbeat("behind", T0 - 600, received_at=T0 + 1, is_retained=True)
    health = live.health(["behind"], T0 + 2)["behind"]
    assert health == NodeHealth(alive=False, offline_since=T0 + 20)
    assert live.unconfirmed(T0 + 2) == {"behind": T0 + 1 + 8.5}  # a first decision waits for it
    live.heartbeat("behind", T0 - 598, received_at=T0 + 3, is_retained=False)  # its first live beat
    assert live.health(["behind"], T0 + 4)["behind"].alive
    assert live.unconfirmed(T0 + 4) == {}


def test_a_node_dead_with_a_stale_retained_heartbeat_is_waited_for_a_beat_and_a_half_only() -> None:
    live = tracker()
    live.heartbeat("dead", T0 - 600, received_at=T0, is_retained=True, interval_s=2)
    assert set(live.unconfirmed(T0 + 3.9)) == {"dead"} and live.unconfirmed(T0 + 4.1) == {}
    live.heartbeat("fresh", T0 - 1, received_at=T0, is_retained=True)
    assert "fresh" not in live.unconfirmed(T0)


def test_a_fresh_retained_heartbeat_counts_from_its_own_timestamp_never_later_than_arrival() -> None:
    live = tracker()
    live.heartbeat("recent", T0 - 5, received_at=T0, is_retained=True)
    assert live.health(["recent"], T0 + 16)["recent"] == NodeHealth(alive=False, offline_since=T0 + 15)
    live.heartbeat("future", T0 + 999, received_at=T0, is_retained=True)  # never later than arrival
    assert live.health(["future"], T0 + 21)["future"].offline_since == T0 + 20


def test_older_heartbeat_never_rewinds_the_newer_one() -> None:
    live = tracker()
    live.heartbeat("a", T0 + 50, received_at=T0 + 50, is_retained=False)
    live.heartbeat("a", T0, received_at=T0, is_retained=True)
    assert live.health(["a"], T0 + 60)["a"].alive


def test_offline_status_makes_a_node_offline_at_once_until_the_next_heartbeat() -> None:
    live = tracker()
    live.heartbeat("a", T0, received_at=T0, is_retained=False)
    live.status("a", "offline", received_at=T0 + 2)
    assert live.health(["a"], T0 + 3)["a"] == NodeHealth(alive=False, offline_since=T0 + 2)
    live.status("a", "offline", received_at=T0 + 9)  # a repeated will keeps the first time
    assert live.health(["a"], T0 + 10)["a"].offline_since == T0 + 2
    live.heartbeat("a", T0 + 11, received_at=T0 + 11, is_retained=False)
    assert live.health(["a"], T0 + 12)["a"].alive


def test_online_status_clears_offline_but_heartbeat_age_still_rules() -> None:
    live = tracker()
    live.heartbeat("a", T0, received_at=T0, is_retained=False)
    live.status("a", "offline", received_at=T0 + 1)
    live.status("a", "online", received_at=T0 + 2)
    assert live.health(["a"], T0 + 5)["a"].alive
    assert not live.health(["a"], T0 + 30)["a"].alive


def test_never_seen_node_is_offline_a_timeout_after_the_tracker_started() -> None:
    live = tracker()
    early = live.health(["ghost"], T0 + 5)["ghost"]
    assert not early.alive and early.offline_for(T0 + 5) == 0  # unknown: nothing new goes there
    assert live.health(["ghost"], T0 + 95)["ghost"].offline_for(T0 + 95) == 75
    live.status("ghost2", "offline", received_at=T0 + 3)
    assert live.health(["ghost2"], T0 + 5)["ghost2"].offline_since == T0 + 3


def test_forget_drops_a_node() -> None:
    live = tracker()
    live.heartbeat("a", T0, received_at=T0, is_retained=False)
    live.forget("a")
    assert not live.health(["a"], T0 + 1)["a"].alive


def test_gc_candidates_are_nodes_offline_longer_than_the_gc_period() -> None:
    now = T0 + 100_000
    health = {
        "old": NodeHealth(alive=False, offline_since=now - 90_000),
        "recent": NodeHealth(alive=False, offline_since=now - 60),
        "up": NodeHealth(alive=True),
    }
    assert gc_candidates(health, now, 86_400) == ["old"]


def test_resume_gives_every_node_a_whole_timeout_from_the_reconnect() -> None:
    """Time spent not listening (a broker outage) is no evidence that a node is down."""
    live = tracker()
    live.heartbeat("a", T0, received_at=T0, is_retained=False)
    live.heartbeat("b", T0, received_at=T0, is_retained=False)
    assert not live.health(["a"], T0 + 100)["a"].alive  # as it looks after 100 s of hearing nothing
    live.resume(T0 + 100, listened_until=T0 + 5)
    health = live.health(["a", "b", "ghost"], T0 + 120)
    assert health["a"].alive and health["b"].alive  # heard from until the outage: alive
    assert not health["ghost"].alive and health["ghost"].offline_for(T0 + 120) == 0  # started again
    live.heartbeat("b", T0 + 110, received_at=T0 + 110, is_retained=False)
    late = live.health(["a", "b"], T0 + 125)
    assert late["a"] == NodeHealth(alive=False, offline_since=T0 + 120) and late["b"].alive
    assert live.health(["ghost"], T0 + 130)["ghost"].offline_since == T0 + 120
    live.heartbeat("a", T0 + 50, received_at=T0 + 50, is_retained=True)  # a stale replay rewinds nothing
    assert live.health(["a"], T0 + 125)["a"].offline_since == T0 + 120


def test_resume_keeps_known_offline_nodes_offline_but_restarts_their_grace() -> None:
    live = tracker()
    live.heartbeat("silent", T0, received_at=T0, is_retained=False)  # offline from T0 + 20
    live.heartbeat("willed", T0 + 30, received_at=T0 + 30, is_retained=False)
    live.status("willed", "offline", received_at=T0 + 31)
    live.status("never", "offline", received_at=T0 + 2)  # a will, never a heartbeat
    live.heartbeat("up", T0 + 35, received_at=T0 + 35, is_retained=False)
    live.resume(T0 + 200, listened_until=T0 + 40)  # listening until T0 + 40, back at T0 + 200
    health = live.health(["silent", "willed", "never", "up"], T0 + 210)
    for node in ("silent", "willed", "never"):  # nothing new goes there; 10 s offline, not 190
        assert health[node] == NodeHealth(alive=False, offline_since=T0 + 200), node
    assert health["up"].alive
    live.heartbeat("silent", T0 + 211, received_at=T0 + 211, is_retained=False)  # really back
    assert live.health(["silent"], T0 + 212)["silent"].alive
