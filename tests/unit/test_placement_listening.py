"""Listening (placement.listening): no decision while the actual plane is not heard, and
liveness resumed after a (re)connect that may have missed heartbeats, including one between
two checks, but not after one that resumed its session (an OAuth2 token switch).
A small connection stand-in and a fake clock; the real broker is in test_placement_loop."""

from __future__ import annotations

from dataclasses import dataclass

from placement.listening import Listening
from tests.support.actual import heartbeat, placement_health

T0 = 1_000.0


@dataclass
class Link:
    is_connected: bool = True
    connect_count: int = 1
    session_resumed: bool = True  # MQTT 5, broker up: a reconnect finds the session kept


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> float:
        return self.now


def test_not_connected_is_not_listening_and_a_reconnect_resumes_liveness() -> None:
    clock, link = Clock(), Link()
    live = placement_health(timeout_s=20, started_at=T0)
    listening = Listening(link, live.view, clock=clock, where="mqtt://127.0.0.1:1883")
    listening.resume()
    heartbeat(live, "a", T0, received_at=T0, is_retained=False)
    assert listening.check() and listening.deaf_since is None

    link.is_connected = False
    clock.now = T0 + 100
    assert not listening.check() and listening.deaf_since == T0 + 100
    assert "not connected to the actual plane (mqtt://127.0.0.1:1883)" in listening.reason
    clock.now = T0 + 150
    assert not listening.check() and listening.deaf_since == T0 + 100  # since the first

    link.is_connected, link.connect_count = True, 2  # session kept, yet a check saw the gap
    assert listening.check() and listening.deaf_since is None
    assert live.health(["a"], T0 + 170)["a"].alive  # a whole timeout from the reconnect
    assert not live.health(["a"], T0 + 171)["a"].alive


def test_a_reconnect_between_two_checks_still_resumes() -> None:
    clock, link = Clock(), Link()
    live = placement_health(timeout_s=20, started_at=T0)
    listening = Listening(link, live.view, clock=clock, where="b")
    listening.resume()
    heartbeat(live, "a", T0, received_at=T0, is_retained=False)
    assert listening.check()
    # down and up again before the next pass, and the broker had lost our session
    clock.now, link.connect_count, link.session_resumed = T0 + 90, 2, False
    assert listening.check()
    assert live.health(["a"], T0 + 100)["a"].alive
    clock.now = T0 + 200  # connected all along since: silence is evidence again
    assert listening.check() and not live.health(["a"], T0 + 200)["a"].alive


def test_a_reconnect_that_resumed_its_session_keeps_known_offline_nodes_offline() -> None:
    """A token switch reconnects with the MQTT 5 session kept: QoS 1 heartbeats sent meanwhile
    were queued and delivered, nothing was missed, so a dead node's grace goes on; a reconnect
    without the session (or after a gap a check saw) may have missed some, so it resumes."""
    clock, link = Clock(), Link()
    live = placement_health(timeout_s=20, started_at=T0)
    listening = Listening(link, live.view, clock=clock, where="b")
    listening.resume()
    heartbeat(live, "dead", T0, received_at=T0, is_retained=False)
    heartbeat(live, "a", T0, received_at=T0, is_retained=False)
    clock.now = T0 + 50
    assert listening.check() and live.health(["dead"], T0 + 50)["dead"].offline_since == T0 + 20

    link.connect_count = 2  # a token switch between two checks: the session was kept
    clock.now = T0 + 55
    heartbeat(live, "a", T0 + 55, received_at=T0 + 55, is_retained=False)
    assert listening.check()
    assert live.health(["dead"], T0 + 90)["dead"].offline_since == T0 + 20  # 70 s: its replicas move

    link.connect_count, link.session_resumed = 3, False  # the broker had lost the session
    clock.now = T0 + 95
    assert listening.check()
    restarted = live.health(["dead", "a"], T0 + 95)
    assert restarted["dead"].offline_since == T0 + 95 and restarted["a"].alive

    link.is_connected = False  # gone long enough for a check to see it, then the session resumed
    clock.now = T0 + 130
    assert not listening.check()
    link.is_connected, link.connect_count, link.session_resumed = True, 4, True
    clock.now = T0 + 200
    assert listening.check()
    assert live.health(["dead"], T0 + 200)["dead"].offline_since == T0 + 200


def test_token_switches_every_45_s_never_stop_a_dead_node_s_replicas_from_moving() -> None:
    clock, link = Clock(), Link()
    live = placement_health(timeout_s=20, started_at=T0)
    listening = Listening(link, live.view, clock=clock, where="b")
    listening.resume()
    heartbeat(live, "dead", T0, received_at=T0, is_retained=False)
    longest = 0.0
    for step in range(1, 40):  # a pass every 5 s; a token switch, session kept, every 45 s
        clock.now = T0 + 5 * step
        if step % 9 == 0:
            link.connect_count += 1
        assert listening.check()
        longest = max(longest, live.health(["dead"], clock.now)["dead"].offline_for(clock.now))
    assert longest == 5 * 39 - 20  # offline since T0 + 20 all along: past any grace period
