"""The one bounded wait: returns the condition's value, or fails naming what and the last value."""

from __future__ import annotations

import itertools

import pytest

from tests.support.waiting import wait_for


def test_returns_the_first_truthy_value() -> None:
    counter = itertools.count()
    assert wait_for(lambda: next(counter) >= 3 and "three", "three polls", 5, interval=0) == "three"


def test_a_timeout_names_what_was_awaited_and_the_last_value_seen() -> None:
    with pytest.raises(AssertionError, match=r"waiting for the answer; last observed: \[\]"):
        wait_for(list, "the answer", 0.05, interval=0.01)


def test_observe_replaces_the_bare_false_in_the_message() -> None:
    with pytest.raises(AssertionError, match="last observed: 'state=stuck'"):
        wait_for(lambda: False, "progress", 0.05, interval=0.01, observe=lambda: "state=stuck")


def test_an_error_of_the_condition_is_not_swallowed() -> None:
    with pytest.raises(ZeroDivisionError):
        wait_for(lambda: 1 / 0, "a broken condition", 1)


def test_pause_is_what_waits_between_two_looks() -> None:
    """A caller that hears of progress (an MQTT message) ends the pause early: the wait
    looks again at once instead of after the rest of its interval."""
    pauses: list[float] = []
    counter = itertools.count()
    assert wait_for(lambda: next(counter) >= 2, "two looks", 5, interval=0.5, pause=pauses.append)
    assert pauses == [0.5, 0.5]
