"""Coalescing of config_sync.intake.queue: many triggers while a job runs → one more run."""

from __future__ import annotations

import threading

from config_sync.intake.queue import Worker, WorkQueue
from phrame.runtime import Backoff, TemporaryError
from tests.support.services import eventually


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_burst_while_running_coalesces_to_one_more_run() -> None:
    release = threading.Event()
    started = threading.Event()
    runs: list[int] = []

    def job() -> None:
        runs.append(len(runs))
        started.set()
        release.wait(5)

    worker = Worker("main").start()
    try:
        worker.trigger("ref:main", job)
        assert started.wait(5)
        for _ in range(50):
            worker.trigger("ref:main", job)
        assert worker.queued == 1
        release.set()
        assert worker.wait_idle(5)
        assert len(runs) == 2
    finally:
        worker.stop()


def test_distinct_keys_each_run_latest_job_wins() -> None:
    seen: list[str] = []
    gate = threading.Event()
    worker = Worker("reviews").start()
    try:
        worker.trigger("block", lambda: gate.wait(5))
        worker.trigger("mr:7", lambda: seen.append("7-old"))
        worker.trigger("mr:8", lambda: seen.append("8"))
        worker.trigger("mr:7", lambda: seen.append("7-new"))
        gate.set()
        assert worker.wait_idle(5)
        assert sorted(seen) == ["7-new", "8"]
    finally:
        worker.stop()


def test_a_failing_job_does_not_kill_the_worker() -> None:
    done: list[bool] = []

    def boom() -> None:
        raise RuntimeError("git fetch failed")

    worker = Worker("main").start()
    try:
        worker.trigger("a", boom)
        assert worker.wait_idle(5)
        worker.trigger("a", lambda: done.append(True))
        assert worker.wait_idle(5)
        assert done == [True]
        assert worker.failures == 1 and "git fetch failed" in str(worker.last_error)
    finally:
        worker.stop()


def test_poll_runs_when_idle() -> None:
    polled = threading.Event()
    queue = WorkQueue(poll_s=0.05)
    try:
        queue.worker("ref:main", poll=polled.set)
        assert polled.wait(5)
    finally:
        queue.stop()
    assert not any(w.is_alive() for w in queue.workers.values())


def test_a_lone_trigger_runs_at_once_without_waiting_for_the_debounce() -> None:
    """A push is one hook: its sync does not wait the window (the clock never moves here)."""
    clock = FakeClock()
    ran = threading.Event()
    worker = Worker("main", debounce_s=0.5, clock=clock).start()
    try:
        worker.trigger("ref:main", ran.set)
        assert ran.wait(5)
    finally:
        worker.stop()


def burst(worker: Worker, runs: list[int], n: int, *, first: int = 0) -> None:
    for i in range(first, first + n):
        worker.trigger("ref:main", lambda i=i: runs.append(i))  # type: ignore[misc]


def test_a_burst_makes_its_leading_run_and_one_more_when_it_pauses() -> None:
    """The first trigger runs at once; the rest of the burst (during that run and after it)
    is one more run of the latest job, when the triggers pause for the window: each trigger
    starts the wait again. Two syncs per burst, as many as a trailing debounce with the
    burst spread over its first run."""
    clock = FakeClock()
    runs: list[int] = []
    release, started, finished = threading.Event(), threading.Event(), threading.Event()

    def first() -> None:
        runs.append(0)
        started.set()
        release.wait(5)
        finished.set()

    worker = Worker("main", debounce_s=0.5, clock=clock).start()
    try:
        worker.trigger("ref:main", first)
        assert started.wait(5)
        burst(worker, runs, 500, first=1)  # while the leading run runs
        release.set()
        assert finished.wait(5) and worker.queued == 1
        clock.now += 0.3
        burst(worker, runs, 499, first=501)  # 0.3 s later, after the run: the wait starts again
        clock.now += 0.49
        worker.wake()
        assert not worker.wait_idle(0.2) and runs == [0]  # 0.49 s after the last trigger
        clock.now += 0.01
        worker.wake()
        assert worker.wait_idle(5) and runs == [0, 999]
    finally:
        worker.stop()


def test_a_trigger_just_after_a_run_is_held_as_the_tail_of_its_burst() -> None:
    clock = FakeClock()
    runs: list[int] = []

    def slow() -> None:  # a sync of 0.4 s
        runs.append(0)
        clock.now += 0.4

    worker = Worker("main", debounce_s=0.5, clock=clock).start()
    try:
        worker.trigger("ref:main", slow)
        assert worker.wait_idle(5) and runs == [0]
        clock.now += 0.2  # 0.6 s after the trigger, 0.2 s after its run ended
        burst(worker, runs, 1, first=1)
        assert not worker.wait_idle(0.2) and runs == [0]
        clock.now += 0.5
        worker.wake()
        assert worker.wait_idle(5) and runs == [0, 1]
        clock.now += 0.5  # quiet again: at once
        burst(worker, runs, 1, first=2)
        assert worker.wait_idle(5) and runs == [0, 1, 2]
    finally:
        worker.stop()


def settled(worker: Worker, clock: FakeClock) -> bool:
    """Nothing runs and nothing is due at the clock's time (called when no trigger comes in:
    a key that waits then is not held by the worker)."""
    due = worker.queue.due("ref:main")
    return worker.is_idle() or (due is not None and due > clock.now)


def test_a_stream_that_never_pauses_runs_once_per_longest_hold() -> None:
    """Triggers every 0.1 s for 6 s with a 0.5 s window: the leading run, then one run per
    HOLD_WINDOWS windows (2 s) of held triggers, not one per trigger nor none until the end."""
    from config_sync.intake.queue import HOLD_WINDOWS

    clock = FakeClock()
    runs: list[float] = []
    worker = Worker("main", debounce_s=0.5, clock=clock).start()
    try:
        start = clock.now
        for _ in range(60):
            worker.trigger("ref:main", lambda: runs.append(clock.now - start))
            worker.wake()
            assert eventually(lambda: settled(worker, clock))  # a due run ran before the clock moves
            clock.now = round(clock.now + 0.1, 6)
            worker.wake()
            assert eventually(lambda: settled(worker, clock))
        clock.now += 1.0
        worker.wake()
        assert worker.wait_idle(5)
        # at once; 2 s after the first trigger held (0.1 s: 2.1 s; the trigger at 2.1 s comes
        # after that run: 4.1 s); then the last triggers' run is due at 6.1 s, sooner than
        # 0.5 s after the last trigger: it runs when the clock next moves (7 s)
        hold = HOLD_WINDOWS * 0.5
        assert [round(t, 3) for t in runs] == [0.0, 0.1 + hold, 2.1 + hold, 7.0], runs
    finally:
        worker.stop()


def test_without_a_debounce_every_trigger_runs_at_once() -> None:
    clock = FakeClock()
    runs: list[int] = []
    worker = Worker("main", clock=clock).start()
    try:
        for i in range(3):
            burst(worker, runs, 1, first=i)
            assert worker.wait_idle(5)
        assert runs == [0, 1, 2]
    finally:
        worker.stop()


def test_retire_only_if_still_that_worker() -> None:
    """A job of a worker retired earlier must not stop the new worker of the same name."""
    queue = WorkQueue()
    try:
        old = queue.worker("ref:release")
        assert queue.retire("ref:release")
        new = queue.worker("ref:release")
        assert new is not old
        assert queue.retire("ref:release", only_if=old) is False
        assert queue.workers["ref:release"] is new and new.is_alive()
        current: list[bool] = []
        new.trigger("who", lambda: current.append(new.is_current()))
        assert new.wait_idle(5) and current == [True] and not new.is_current()
        assert queue.retire("ref:release", only_if=new) and "ref:release" not in queue.workers
    finally:
        queue.stop()


class Flaky(TemporaryError):
    """A temporary failure (as GitError and PublishError are to config-sync)."""


def test_backoff_doubles_from_min_to_the_cap() -> None:
    backoff = Backoff(1.0, 60.0)
    assert [backoff.delay(n) for n in range(1, 9)] == [1, 2, 4, 8, 16, 32, 60, 60]
    assert backoff.delay(10_000) == 60


def test_a_transient_failure_is_retried_with_capped_exponential_backoff_and_reset_on_success() -> None:
    clock = FakeClock()
    outcomes = [Flaky("fetch"), Flaky("fetch"), Flaky("fetch"), None, Flaky("fetch")]
    ran = threading.Semaphore(0)

    def job() -> None:
        ran.release()
        error = outcomes.pop(0)
        if error is not None:
            raise error

    worker = Worker("ref:main", backoff=Backoff(1.0, 3.0), clock=clock).start()
    try:
        worker.trigger("main", job)
        for expected in (1.0, 2.0, 3.0):  # 1, 2, then capped at 3 (not 4)
            assert ran.acquire(timeout=5)
            assert eventually(lambda: worker.retry_due("main") is not None)
            assert worker.retry_due("main") == clock.now + expected
            assert eventually(worker.is_idle)  # a waiting retry is scheduled work, not pending work
            clock.now += expected - 0.01
            worker.wake()
            assert not ran.acquire(timeout=0.1)  # not yet due: not run
            clock.now += 0.01
            worker.wake()
        assert ran.acquire(timeout=5)  # the fourth run succeeds: no retry, count reset
        assert worker.wait_idle(5) and worker.retry_due("main") is None and "main" not in worker.retries
        worker.trigger("main", job)  # fails again: starts over at 1 s
        assert ran.acquire(timeout=5)
        assert eventually(lambda: worker.retry_due("main") is not None)
        assert worker.retry_due("main") == clock.now + 1.0 and worker.failures == 4
    finally:
        worker.stop()


def test_a_permanent_failure_is_not_retried() -> None:
    clock = FakeClock()
    worker = Worker("ref:main", clock=clock).start()
    try:
        worker.trigger("main", lambda: 1 / 0)
        assert worker.wait_idle(5)
        assert worker.failures == 1 and worker.retry_due("main") is None and worker.queued == 0
    finally:
        worker.stop()


def test_a_trigger_runs_at_once_although_a_retry_of_its_key_waits() -> None:
    clock = FakeClock()
    runs: list[str] = []

    def failing() -> None:
        runs.append("failed")
        raise Flaky("broker down")

    worker = Worker("ref:main", backoff=Backoff(30.0, 60.0), clock=clock).start()
    try:
        worker.trigger("main", failing)
        assert eventually(lambda: worker.retry_due("main") == clock.now + 30.0)
        worker.trigger("main", lambda: runs.append("triggered"))  # a push: maybe a fix
        assert worker.wait_idle(5) and runs == ["failed", "triggered"]
        assert worker.queued == 0 and "main" not in worker.retries
    finally:
        worker.stop()
