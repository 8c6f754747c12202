"""Stream tickets: short-lived, single use, bounded in number; on a fake clock."""

from __future__ import annotations

from topic_api.tickets import StreamTickets


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_ticket_is_good_once_and_only_until_it_expires() -> None:
    clock = Clock()
    tickets = StreamTickets(ttl_s=60.0, max_open=10, clock=clock)
    a, b = tickets.issue(), tickets.issue()
    assert a is not None and b is not None and a != b and len(a) >= 32
    assert tickets.redeem(a) and not tickets.redeem(a)  # single use
    assert not tickets.redeem("") and not tickets.redeem("x" * 40)
    clock.now += 60.5
    assert not tickets.redeem(b)  # expired


def test_unredeemed_tickets_are_bounded_and_expiry_makes_room() -> None:
    clock = Clock()
    tickets = StreamTickets(ttl_s=60.0, max_open=2, clock=clock)
    assert tickets.issue() and tickets.issue()
    assert tickets.issue() is None  # full
    clock.now += 61
    assert tickets.issue() is not None and len(tickets) == 1
