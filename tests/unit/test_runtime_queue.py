"""phrame.runtime's work queue and backoff, driven by a fake clock: no thread, no sleep."""

from __future__ import annotations

import threading

from phrame.runtime import Backoff, WorkQueue, backoff
from tests.support.signals import sigterm_while


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_backoff_doubles_from_base_to_the_cap() -> None:
    assert [backoff(n, base=1.0, cap=60.0) for n in range(1, 9)] == [1, 2, 4, 8, 16, 32, 60, 60]
    assert backoff(10_000, base=0.5, cap=3.0) == 3.0
    assert backoff(0) == 1.0  # no failure yet counts as the first
    assert Backoff(0.2, 3.0).delay(3) == 0.8


def test_jitter_takes_at_most_its_share_off_and_never_exceeds_the_cap() -> None:
    assert backoff(3, base=1.0, cap=60.0, jitter=0.5, rand=lambda: 1.0) == 2.0
    assert backoff(3, base=1.0, cap=60.0, jitter=0.5, rand=lambda: 0.0) == 4.0
    assert backoff(99, base=1.0, cap=10.0, jitter=1.0, rand=lambda: 0.25) == 7.5
    assert all(0 <= backoff(n, cap=10.0, jitter=1.0) <= 10.0 for n in range(1, 50))


def test_a_key_waits_once_and_a_second_add_only_brings_it_forward() -> None:
    clock = FakeClock()
    queue: WorkQueue[str] = WorkQueue(clock=clock)
    queue.add("a", 5.0)
    queue.add("a", 9.0)  # later: keeps 5
    assert len(queue) == 1 and queue.get(block=False) is None
    clock.now += 5.0
    assert queue.get(block=False) == "a" and len(queue) == 0
    queue.done("a")
    queue.add("b", 5.0)
    queue.add("b", 1.0)  # sooner: moves it forward
    clock.now += 1.0
    assert queue.get(block=False) == "b"


def test_a_postponing_add_moves_waiting_input_later_but_never_a_retry() -> None:
    """A trailing debounce: each trigger starts the wait again (``postpone``); a retry's
    earlier time still holds, and ``due`` says when the key runs."""
    clock = FakeClock()
    queue: WorkQueue[str] = WorkQueue(clock=clock, backoff=Backoff(1.0, 60.0))
    queue.add("a", 1.0)
    queue.add("a", 3.0, postpone=True)
    assert queue.due("a") == clock.now + 3.0 and queue.due("b") is None
    clock.now += 2.0
    assert queue.get(block=False) is None
    queue.add("a", 0.5, postpone=True)  # sooner than its time: moves it forward as well
    assert queue.due("a") == clock.now + 0.5
    clock.now += 0.5
    assert queue.get(block=False) == "a"
    queue.retry("a")  # due in 1 s
    queue.done("a")
    queue.add("a", 5.0, postpone=True)
    assert queue.due("a") == clock.now + 1.0  # the retry's time, now as new input
    clock.now += 1.0
    assert queue.get(block=False) == "a"


def test_earliest_due_first() -> None:
    clock = FakeClock()
    queue: WorkQueue[str] = WorkQueue(clock=clock)
    queue.add("late", 2.0)
    queue.add("soon", 1.0)
    queue.add("now")
    clock.now += 3.0
    assert [queue.get(block=False) for _ in range(3)] == ["now", "soon", "late"]


def test_a_key_added_while_held_runs_once_more_after_done_never_twice_at_once() -> None:
    queue: WorkQueue[str] = WorkQueue(clock=FakeClock())
    queue.add("a")
    assert queue.get(block=False) == "a"
    for _ in range(50):
        queue.add("a")
    assert len(queue) == 1 and queue.get(block=False) is None  # held: not handed out again
    assert not queue.is_idle()
    queue.done("a")
    assert queue.get(block=False) == "a"
    queue.done("a")
    assert queue.is_idle() and len(queue) == 0


def test_retry_backs_off_per_key_and_forget_starts_over() -> None:
    clock = FakeClock()
    queue: WorkQueue[str] = WorkQueue(clock=clock, backoff=Backoff(1.0, 3.0))
    delays = []
    for _ in range(4):
        queue.add("a")
        assert queue.get(block=False) == "a"
        n, delay = queue.retry("a")
        delays.append((n, delay))
        assert queue.retry_due("a") == clock.now + delay
        queue.done("a")
        assert queue.is_idle()  # a waiting retry is scheduled work, not pending work
        assert queue.get(block=False) is None
        queue.add("a")  # new input runs at once although the retry waits
        assert queue.retry_due("a") is None
        assert queue.get(block=False) == "a"
        queue.done("a")
    assert delays == [(1, 1.0), (2, 2.0), (3, 3.0), (4, 3.0)]
    assert queue.retry("b", 7.0) == (1, 7.0)  # a given delay wins over the backoff
    assert queue.failures() == {"a": 4, "b": 1}
    queue.forget("a")
    assert queue.retry("a")[0] == 1


def test_a_retry_runs_when_due_and_never_postpones_new_input() -> None:
    clock = FakeClock()
    queue: WorkQueue[str] = WorkQueue(clock=clock, backoff=Backoff(10.0, 60.0))
    queue.add("a")
    assert queue.get(block=False) == "a"
    queue.add("a", 1.0)  # new input while held
    queue.retry("a")  # the pass failed: its input waiting already keeps its time
    queue.done("a")
    assert queue.retry_due("a") is None
    clock.now += 1.0
    assert queue.get(block=False) == "a"
    queue.retry("a")
    queue.done("a")
    assert queue.retry_due("a") == clock.now + 20.0
    clock.now += 19.9
    assert queue.get(block=False) is None
    clock.now += 0.1
    assert queue.get(block=False) == "a"


def test_a_limit_refuses_only_new_keys() -> None:
    queue: WorkQueue[str] = WorkQueue(clock=FakeClock())
    assert [queue.add(f"mr:{i}", limit=3) for i in range(5)] == [True, True, True, False, False]
    assert queue.add("mr:1", limit=3) and len(queue) == 3


def test_resync_adds_every_key_after_a_quiet_period() -> None:
    clock = FakeClock()
    queue: WorkQueue[str] = WorkQueue(clock=clock, resync_s=30.0, resync=lambda: ["x", "y"])
    assert queue.get(block=False) is None
    clock.now += 30.0
    assert queue.get(block=False) == "x"
    clock.now += 20.0
    queue.done("x")  # work finished: the next resync is 30 s from now
    assert queue.get(block=False) == "y"
    queue.done("y")
    clock.now += 29.0
    assert queue.get(block=False) is None
    clock.now += 1.0
    assert queue.get(block=False) == "x"


def test_shutdown_ends_a_blocked_get() -> None:
    queue: WorkQueue[str] = WorkQueue()
    got: list[str | None] = []
    taker = threading.Thread(target=lambda: got.append(queue.get()))
    taker.start()
    queue.shutdown()
    taker.join(5)
    assert got == [None] and not queue.add("a")


def test_a_waiting_get_lets_a_signal_taken_by_another_thread_stop_the_main_thread(tmp_path) -> None:
    """The kernel may hand SIGTERM to any thread; Python runs its handler on the main thread
    only when that thread runs again. A ``get`` blocked without a timeout never did, so a
    service ignored SIGTERM (placement, seen in CI). Here the main thread blocks SIGTERM, so
    the kernel must deliver it to the other thread, as it may in a service."""
    setup = """
        import signal
        from phrame.runtime import WorkQueue
        q = WorkQueue()
        signal.signal(signal.SIGTERM, lambda *_: q.shutdown())
    """
    code, out = sigterm_while(tmp_path, setup, 'print("got", q.get(), flush=True)\n', 10)
    assert (code, out) == (0, "got None")  # shut down: the get returned
