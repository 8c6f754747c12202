"""DesiredReread: when the agent reads its desired topics back (fake clock)."""

from __future__ import annotations

from node_agent.desired_reread import DesiredReread


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_every_period_and_never_when_off() -> None:
    clock = Clock()
    r = DesiredReread(60, clock=clock)
    clock.now += 59
    assert not r.due(waiting=False)
    clock.now += 1
    assert r.due(waiting=False)
    r.read(waiting=False)
    assert r.next_at() == clock.now + 60
    off = DesiredReread(0, clock=clock)
    clock.now += 10_000
    assert not off.due(waiting=True) and off.next_at() is None


def test_soon_while_waiting_then_backing_off_to_the_period() -> None:
    clock = Clock()
    r = DesiredReread(60, clock=clock, waiting_s=5)
    clock.now += 1
    assert not r.due(waiting=True)  # waiting since now
    clock.now += 5
    assert r.due(waiting=True)
    r.read(waiting=True)
    waits = []
    for _ in range(6):
        at = r.next_at()
        assert at is not None
        waits.append(at - clock.now)
        clock.now = at
        assert r.due(waiting=True)
        r.read(waiting=True)
    assert waits == [10, 20, 40, 60, 60, 60]
    r.read(waiting=False)  # the state is whole again: back to the period
    assert not r.due(waiting=False)
    assert r.next_at() == clock.now + 60
