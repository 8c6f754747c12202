"""Listening (placement.listening): no decision while the actual plane is not heard, and
liveness resumed on every (re)connect, including one that happened between two checks.
A small connection stand-in and a fake clock; the real broker is in test_placement_loop."""

from __future__ import annotations

from dataclasses import dataclass

from placement.listening import Listening
from placement.liveness import Liveness

T0 = 1_000.0


@dataclass
class Link:
    is_connected: bool = True
    connect_count: int = 1


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> float:
        return self.now


def test_not_connected_is_not_listening_and_a_reconnect_resumes_liveness() -> None:
    clock, link = Clock(), Link()
    live = Liveness(timeout_s=20, started_at=T0)
    listening = Listening(link, live, clock=clock, where="mqtt://127.0.0.1:1883")
    listening.resume()
    live.heartbeat("a", T0, received_at=T0, is_retained=False)
    assert listening.check() and listening.deaf_since is None

    link.is_connected = False
    clock.now = T0 + 100
    assert not listening.check() and listening.deaf_since == T0 + 100
    assert "not connected to the actual plane (mqtt://127.0.0.1:1883)" in listening.reason
    clock.now = T0 + 150
    assert not listening.check() and listening.deaf_since == T0 + 100  # since the first

    link.is_connected, link.connect_count = True, 2
    assert listening.check() and listening.deaf_since is None
    assert live.health(["a"], T0 + 170)["a"].alive  # a whole timeout from the reconnect
    assert not live.health(["a"], T0 + 171)["a"].alive


def test_a_reconnect_between_two_checks_still_resumes() -> None:
    clock, link = Clock(), Link()
    live = Liveness(timeout_s=20, started_at=T0)
    listening = Listening(link, live, clock=clock, where="b")
    listening.resume()
    live.heartbeat("a", T0, received_at=T0, is_retained=False)
    assert listening.check()
    clock.now, link.connect_count = T0 + 90, 2  # down and up again before the next pass
    assert listening.check()
    assert live.health(["a"], T0 + 100)["a"].alive
    clock.now = T0 + 200  # connected all along since: silence is evidence again
    assert listening.check() and not live.health(["a"], T0 + 200)["a"].alive
