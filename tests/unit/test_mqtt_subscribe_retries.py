"""Asking again for a refused subscription: backoff per filter, a grant or stop ends it."""

from __future__ import annotations

import threading

from phrame.mqtt.subscribe_retries import SubscribeRetries


def test_a_refused_filter_is_asked_for_again_with_growing_delays() -> None:
    asked: list[str] = []
    done = threading.Event()

    def again(f: str) -> None:
        asked.append(f)
        done.set()

    retries = SubscribeRetries(again, first_delay_s=0.01, max_delay_s=0.04)
    delays = [retries.refused("a/#") for _ in range(4)]
    assert delays == [0.01, 0.02, 0.04, 0.04]  # doubling, capped
    assert done.wait(5)
    assert asked == ["a/#"]  # one timer per filter: a newer refusal replaces the older timer
    retries.stop()


def test_a_grant_cancels_and_resets() -> None:
    asked: list[str] = []
    retries = SubscribeRetries(asked.append, first_delay_s=30)
    retries.refused("a/#")
    retries.refused("a/#")
    assert retries.pending() == ["a/#"]
    retries.granted("a/#")
    assert retries.pending() == []
    assert retries.refused("a/#") == 30  # counting starts again
    retries.stop()
    assert retries.pending() == [] and asked == []


def test_nothing_is_scheduled_after_stop() -> None:
    retries = SubscribeRetries(lambda f: None, first_delay_s=30)
    retries.stop()
    retries.refused("a/#")
    assert retries.pending() == []
