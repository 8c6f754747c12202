"""phrame.runtime's Runner: sync(key) on worker threads, TemporaryError and PermanentError.

A fake clock drives every backoff; a test waits on what the workers did, never a fixed time.
"""

from __future__ import annotations

import threading

from phrame.runtime import Backoff, PermanentError, Runner, TemporaryError
from tests.support.services import eventually


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_temporary_error_is_retried_with_backoff_and_a_success_resets_it() -> None:
    clock = FakeClock()
    outcomes: list[Exception | None] = [TemporaryError("away"), TemporaryError("away"), None]
    ran = threading.Semaphore(0)

    def sync(key: str) -> None:
        ran.release()
        error = outcomes.pop(0)
        if error is not None:
            raise error

    runner = Runner("t", sync, backoff=Backoff(2.0, 60.0), clock=clock).start()
    try:
        runner.queue.add("k")
        for expected in (2.0, 4.0):
            assert ran.acquire(timeout=5)
            assert eventually(lambda: runner.queue.retry_due("k") is not None)
            assert runner.queue.retry_due("k") == clock.now + expected
            clock.now += expected - 0.01
            runner.queue.wake()
            assert not ran.acquire(timeout=0.1)  # not due yet
            clock.now += 0.01
            runner.queue.wake()
        assert ran.acquire(timeout=5)
        assert runner.queue.wait_idle(5)
        assert runner.queue.failures() == {} and runner.runs == 1 and runner.failures == 2
    finally:
        runner.stop()


def test_a_temporary_error_with_a_delay_runs_again_after_that_delay() -> None:
    clock = FakeClock()
    calls: list[str] = []

    def sync(key: str) -> None:
        calls.append(key)
        if len(calls) == 1:
            raise TemporaryError("branch moved", delay=7.0)

    runner = Runner("t", sync, clock=clock).start()
    try:
        runner.queue.add("k")
        assert eventually(lambda: runner.queue.retry_due("k") == clock.now + 7.0)
        clock.now += 7.0
        runner.queue.wake()
        assert eventually(lambda: len(calls) == 2)
    finally:
        runner.stop()


def test_a_permanent_error_is_recorded_and_waits_for_new_input() -> None:
    clock = FakeClock()
    broken = [True]

    def sync(key: str) -> None:
        if broken[0]:
            raise PermanentError(f"{key}: invalid spec")

    runner = Runner("t", sync, clock=clock).start()
    try:
        runner.queue.add("k")
        assert eventually(lambda: "k" in runner.errors)
        assert runner.queue.wait_idle(5)
        assert runner.queue.retry_due("k") is None and len(runner.queue) == 0
        assert runner.errors == {"k": "PermanentError: k: invalid spec"}
        broken[0] = False
        runner.queue.add("k")  # new input: runs again, and its success clears the record
        assert eventually(lambda: runner.runs == 1) and runner.errors == {}
    finally:
        runner.stop()


def test_an_unexpected_error_is_not_retried_and_the_worker_lives_on() -> None:
    seen: list[str] = []

    def sync(key: str) -> None:
        seen.append(key)
        if key == "bad":
            raise ZeroDivisionError("a bug")

    runner = Runner("t", sync, clock=FakeClock()).start()
    try:
        runner.queue.add("bad")
        assert eventually(lambda: runner.failures == 1)
        runner.queue.add("good")
        assert eventually(lambda: runner.runs == 1)
        assert runner.queue.wait_idle(5) and seen == ["bad", "good"]
        assert "ZeroDivisionError" in str(runner.last_error) and runner.queue.retry_due("bad") is None
    finally:
        runner.stop()


def test_workers_run_distinct_keys_at_once_but_one_key_never_twice_at_once() -> None:
    inside: dict[str, int] = {}
    most: dict[str, int] = {}
    both = threading.Barrier(2, timeout=5)
    lock = threading.Lock()
    runs: list[str] = []

    def sync(key: str) -> None:
        with lock:
            inside[key] = inside.get(key, 0) + 1
            most[key] = max(most.get(key, 0), inside[key])
        if len(runs) < 2:
            both.wait()  # the first two passes (a and b) must overlap: two workers
        with lock:
            runs.append(key)
            inside[key] -= 1

    runner = Runner("t", sync, workers=3).start()
    try:
        runner.queue.add("a")
        runner.queue.add("b")
        assert eventually(lambda: len(runs) == 2)
        for _ in range(20):
            runner.queue.add("a")
        assert runner.queue.wait_idle(5)
        assert most == {"a": 1, "b": 1} and runs.count("a") >= 2
    finally:
        runner.stop()


def test_stop_ends_every_worker_and_a_sync_may_stop_its_own_runner() -> None:
    holder: list[Runner[str]] = []

    def sync(key: str) -> None:
        holder[0].stop()  # from its own worker: does not wait for itself

    runner = Runner("t", sync, workers=2)
    holder.append(runner)
    runner.start()
    runner.queue.add("k")
    assert eventually(lambda: not runner.is_alive())
    assert not runner.queue.add("k")


def test_run_works_on_the_calling_thread_until_stopped() -> None:
    where: list[bool] = []
    holder: list[Runner[str]] = []

    def sync(key: str) -> None:
        where.append(holder[0].is_current())
        if key == "last":
            holder[0].queue.shutdown()

    runner = Runner("t", sync)
    holder.append(runner)
    runner.queue.add("first")
    runner.queue.add("last", 0.01)
    runner.run()  # returns once a sync shut the queue down
    assert where == [True, True] and runner.runs == 2
