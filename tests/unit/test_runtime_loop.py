"""phrame.runtime's BackgroundLoop: ticks until stopped, a wake cuts a wait short, a failing
tick never ends it, and its waits let a signal reach the main thread."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from phrame.runtime import SIGNAL_CHECK_S, BackgroundLoop
from tests.support.signals import sigterm_while

ROOT = Path(__file__).resolve().parents[2]


def test_stop_is_prompt_even_while_the_loop_waits_for_a_wake() -> None:
    ticked = threading.Event()

    def tick() -> None:
        ticked.set()
        return None  # until woken: only stop() ends this wait

    loop = BackgroundLoop("t", tick).start()
    assert ticked.wait(5)
    started = time.monotonic()
    loop.stop()
    assert not loop.is_alive()
    assert time.monotonic() - started < 0.5


def test_a_wake_cuts_a_long_wait_short_and_is_not_lost_before_the_wait() -> None:
    ticks = threading.Semaphore(0)
    gate = threading.Event()

    def tick() -> float:
        ticks.release()
        gate.wait(5)  # the wake below comes while this tick runs, before its wait
        return 3600.0

    loop = BackgroundLoop("t", tick).start()
    try:
        assert ticks.acquire(timeout=5)
        loop.wake()
        gate.set()
        assert ticks.acquire(timeout=2)  # the remembered wake: no hour's wait
        loop.wake()
        assert ticks.acquire(timeout=2)
    finally:
        loop.stop()


def test_an_exception_in_a_tick_is_logged_and_the_loop_goes_on(caplog: pytest.LogCaptureFixture) -> None:
    calls: list[int] = []
    third = threading.Event()

    def tick() -> float:
        calls.append(len(calls))
        if len(calls) == 1:
            raise RuntimeError("a bug in one tick")
        if len(calls) == 3:
            third.set()
        return 0.0

    loop = BackgroundLoop("t", tick, error_wait_s=0.01).start()
    try:
        assert third.wait(5)
        assert loop.is_alive() and loop.failures == 1 and loop.ticks >= 2
        assert "t: a tick failed" in caplog.text and "a bug in one tick" in caplog.text
    finally:
        loop.stop()


def test_the_first_tick_waits_for_wait_first_unless_woken() -> None:
    ticked = threading.Event()
    loop = BackgroundLoop("t", lambda: (ticked.set(), 3600.0)[1], wait_first_s=3600.0).start()
    try:
        assert not ticked.wait(0.2)
        loop.wake()
        assert ticked.wait(2)
    finally:
        loop.stop()


def test_a_loop_on_the_main_thread_lets_a_signal_taken_by_another_thread_stop_it(tmp_path: Path) -> None:
    """Python runs a signal's handler on the main thread only when that thread runs again; a
    wait that blocked without a bound would never stop a service whose main thread runs the
    loop. The main thread blocks SIGTERM here, so the kernel delivers it to the other thread."""
    setup = """
        import signal
        from phrame.runtime import BackgroundLoop
        loop = BackgroundLoop("main", lambda: None)  # waits for a wake that never comes
        signal.signal(signal.SIGTERM, lambda *_: loop.stop())
    """
    code, out = sigterm_while(
        tmp_path, setup, 'loop.run()\nprint("stopped", flush=True)\n', 5 + SIGNAL_CHECK_S
    )
    assert (code, out) == (0, "stopped")
