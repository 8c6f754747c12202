"""A background loop: one thread calling ``tick()`` again and again until :meth:`BackgroundLoop.stop`.

For work that is not keyed (a watcher's periodic check, an outbox's deliveries), where a
:class:`~phrame.runtime.Runner` would be one key forever. ``tick()`` returns how long to wait
before the next (``None``: until :meth:`BackgroundLoop.wake`); :meth:`wake` cuts a wait
short, also one not begun yet (it is remembered, so a wake between a tick and its wait is
never lost). An exception in a tick is logged and the loop waits ``error_wait_s`` and goes
on: it never dies. Every wait, the loop's and :meth:`stop`'s join, blocks at most
:data:`~phrame.runtime.SIGNAL_CHECK_S` at a time, so a main thread waiting here still runs
Python's signal handlers (SIGTERM). Never runs two ticks at once.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from phrame.runtime.queue import SIGNAL_CHECK_S

log = logging.getLogger(__name__)


class BackgroundLoop:
    def __init__(
        self,
        name: str,
        tick: Callable[[], float | None],
        *,
        wait_first_s: float = 0.0,
        error_wait_s: float = 1.0,
    ) -> None:
        """``wait_first_s``: the wait before the first tick (a wake cuts it short too)."""
        self.name, self.tick = name, tick
        self.wait_first_s, self.error_wait_s = wait_first_s, error_wait_s
        self.ticks = 0  # ticks that returned
        self.failures = 0  # ticks that raised
        self._cond = threading.Condition()
        self._stopping = False
        self._woken = False
        self._thread: threading.Thread | None = None

    def start(self) -> BackgroundLoop:
        self._thread = threading.Thread(target=self.run, name=self.name, daemon=True)
        self._thread.start()
        return self

    def run(self) -> None:
        """Tick on the calling thread until :meth:`stop` (what :meth:`start`'s thread runs)."""
        wait: float | None = self.wait_first_s
        while self._wait(wait):
            try:
                wait = self.tick()
                self.ticks += 1
            except Exception:  # the loop never dies from one tick
                self.failures += 1
                log.exception("%s: a tick failed; again in %g s", self.name, self.error_wait_s)
                wait = self.error_wait_s

    def wake(self) -> None:
        """Tick now (any thread; never blocks on a tick)."""
        with self._cond:
            self._woken = True
            self._cond.notify_all()

    def stop(self, timeout: float = 10.0) -> None:
        """No tick after the one running; wait up to ``timeout`` for it (0: do not wait,
        which is also what a tick stopping its own loop gets)."""
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
        thread = self._thread
        if thread is None or thread is threading.current_thread() or timeout <= 0:
            return
        deadline = time.monotonic() + timeout
        while thread.is_alive() and (left := deadline - time.monotonic()) > 0:
            thread.join(min(SIGNAL_CHECK_S, left))

    def is_alive(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def _wait(self, seconds: float | None) -> bool:
        """Wait ``seconds`` (None: until woken), or less if woken; False once stopping."""
        deadline = None if seconds is None else time.monotonic() + max(0.0, seconds)
        with self._cond:
            while not self._stopping and not self._woken:
                left = SIGNAL_CHECK_S if deadline is None else deadline - time.monotonic()
                if left <= 0:
                    break
                self._cond.wait(min(SIGNAL_CHECK_S, left))
            self._woken = False
            return not self._stopping
