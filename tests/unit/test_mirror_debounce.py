"""The mirror's debounce decision with a fake clock: quiet window, storm cap, retry hold-back."""

from __future__ import annotations

import itertools

from mirror.debounce import wait_before_flush

D, M = 0.25, 2.0


def decide(now: float, last: float | None, first: float | None, not_before: float = 0.0) -> float | None:
    return wait_before_flush(now, last, first, debounce_s=D, max_delay_s=M, not_before=not_before)


def test_nothing_unflushed_means_nothing_to_do() -> None:
    assert decide(10.0, 9.0, None) is None


def test_waits_for_the_quiet_window_after_the_last_change() -> None:
    assert decide(10.0, 10.0, 10.0) == D
    assert abs(decide(10.1, 10.0, 10.0) - 0.15) < 1e-9  # type: ignore[operator]
    assert decide(10.25, 10.0, 10.0) == 0.0
    assert decide(11.0, 10.0, 10.0) == 0.0


def test_each_change_restarts_the_quiet_window() -> None:
    assert abs(decide(10.2, 10.2, 10.0) - D) < 1e-9  # type: ignore[operator]


def test_a_storm_that_never_goes_quiet_still_flushes_every_max_delay() -> None:
    clock, first, flushes = 0.0, None, []
    while clock < 10.0:  # a change every 10 ms for 10 s: never quiet for 250 ms
        first = clock if first is None else first
        if decide(clock, clock, first) == 0.0:
            flushes.append(clock)
            first = None
        clock = round(clock + 0.01, 6)
    assert len(flushes) == 4  # at 2, 4, 6, 8 s (10 s is the end)
    assert all(abs(b - a - M) < 0.02 for a, b in itertools.pairwise(flushes))


def test_the_storm_cap_shortens_a_quiet_wait() -> None:
    assert abs(decide(11.9, 11.9, 10.0) - 0.1) < 1e-9  # type: ignore[operator]


def test_a_failed_write_holds_the_retry_back() -> None:
    assert decide(11.0, 10.0, 10.0, not_before=11.25) == 0.25
    assert decide(11.3, 10.0, 10.0, not_before=11.25) == 0.0


B = 10.0  # PHRAME_MIRROR_HEARTBEAT_DELAY_S


def beats(now: float, last: float | None, first: float | None, first_beat: float | None) -> float | None:
    return wait_before_flush(
        now, last, first, debounce_s=D, max_delay_s=M, first_beat_unflushed=first_beat, beat_delay_s=B
    )


def test_heartbeats_alone_are_written_every_heartbeat_delay_not_every_max_delay() -> None:
    clock, first_beat, flushes = 0.0, None, []
    while clock < 30.0:  # a heartbeat every 10 ms for 30 s, nothing else
        first_beat = clock if first_beat is None else first_beat
        if beats(clock, None, None, first_beat) == 0.0:
            flushes.append(clock)
            first_beat = None
        clock = round(clock + 0.01, 6)
    assert len(flushes) == 2  # at 10 and 20 s; without the split, 14 (every 2 s)
    assert all(abs(b - a - B) < 0.02 for a, b in itertools.pairwise(flushes))


def test_a_change_among_heartbeats_waits_only_for_the_quiet_window() -> None:
    # heartbeats never stop, but they are not changes: the change is written a debounce later
    assert beats(10.0, 10.0, 10.0, 5.0) == D
    assert beats(10.25, 10.0, 10.0, 5.0) == 0.0
    assert beats(10.0, None, None, 5.0) == 5.0  # only heartbeats: due 10 s after the first one
