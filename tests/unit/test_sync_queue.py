"""Coalescing of config_sync.queue: many triggers while a job runs → one more run."""

from __future__ import annotations

import threading

from config_sync.queue import Worker, WorkQueue


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
    assert not any(w._thread.is_alive() for w in queue.workers.values())


def test_debounce_gathers_a_burst_before_the_first_run() -> None:
    runs: list[int] = []
    worker = Worker("main", debounce_s=0.3).start()
    try:
        for i in range(20):
            worker.trigger("ref:main", lambda i=i: runs.append(i))  # type: ignore[misc]
        assert not worker.is_idle()
        assert worker.wait_idle(5)
        assert runs == [19]  # one run, of the latest job
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
