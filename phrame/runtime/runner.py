"""Workers that drain one :class:`~phrame.runtime.WorkQueue` through one ``sync(key)``.

A controller builds a :class:`Runner` with its sync function, starts it and from then on
only adds keys (``runner.queue.add``). ``sync(key)`` re-reads what it needs and converges
(level-triggered); a :class:`~phrame.runtime.TemporaryError` requeues the key with backoff,
a :class:`~phrame.runtime.PermanentError` is recorded and waits for new input, and any other
exception is a bug: logged with its traceback and treated as permanent. A worker never dies.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Hashable, Iterable
from typing import Generic, TypeVar

from phrame.runtime.queue import Clock, WorkQueue
from phrame.runtime.retry import Backoff, PermanentError, is_temporary

log = logging.getLogger(__name__)
K = TypeVar("K", bound=Hashable)
MAX_ERRORS = 1000  # keys whose last failure is kept (the oldest go first): keys come and go


class Runner(Generic[K]):
    def __init__(
        self,
        name: str,
        sync: Callable[[K], object],
        *,
        workers: int = 1,
        backoff: Backoff | None = None,
        clock: Clock = time.monotonic,
        resync_s: float | None = None,
        resync: Callable[[], Iterable[K]] | None = None,
    ) -> None:
        self.name = name
        self.sync = sync
        self.queue: WorkQueue[K] = WorkQueue(backoff=backoff, clock=clock, resync_s=resync_s, resync=resync)
        self.runs = 0  # passes that succeeded
        self.failures = 0  # passes that raised, of any kind
        self.last_error: str | None = None
        self.errors: dict[K, str] = {}  # per key, why its last pass failed for good
        self._lock = threading.Lock()
        self._threads = [
            threading.Thread(target=self._work, name=f"{name}-{i}" if workers > 1 else name, daemon=True)
            for i in range(max(1, workers))
        ]

    def start(self) -> Runner[K]:
        for thread in self._threads:
            thread.start()
        return self

    def run(self) -> None:
        """Work on the calling thread until :meth:`stop`, instead of :meth:`start` (a
        controller whose passes stay on its main thread, as the node agent's do)."""
        self._threads = [threading.current_thread()]
        self._work()

    def stop(self, timeout: float = 10.0) -> None:
        """Hand out no more keys; wait up to ``timeout`` for the passes running (0: do not
        wait, which is also what a worker stopping its own runner gets)."""
        self.queue.shutdown()
        if timeout <= 0:
            return
        deadline = time.monotonic() + timeout
        for thread in self._threads:
            if thread.is_alive() and thread is not threading.current_thread():
                thread.join(max(0.0, deadline - time.monotonic()))

    def is_alive(self) -> bool:
        return any(t.is_alive() for t in self._threads)

    def is_current(self) -> bool:
        """Whether the caller runs on one of this runner's workers (inside a ``sync``)."""
        return threading.current_thread() in self._threads

    def _work(self) -> None:
        while (key := self.queue.get()) is not None:
            try:
                self._run(key)
            finally:
                self.queue.done(key)

    def _run(self, key: K) -> None:
        try:
            self.sync(key)
        except Exception as e:  # the worker never dies from one pass
            with self._lock:
                self.failures += 1
                self.last_error = f"{type(e).__name__}: {e}"
            if is_temporary(e):
                n, delay = self.queue.retry(key, getattr(e, "delay", None))
                log.warning("%s: %s failed (%s); retry %d in %g s", self.name, key, self.last_error, n, delay)
                return
            self.queue.forget(key)
            with self._lock:
                self.errors.pop(key, None)  # re-inserted last: the oldest entry is the first
                self.errors[key] = self.last_error
                if len(self.errors) > MAX_ERRORS:
                    del self.errors[next(iter(self.errors))]
            if isinstance(e, PermanentError):
                log.error("%s: %s failed: %s; it waits for new input", self.name, key, e)
            else:
                log.exception("%s: %s failed; the next trigger or resync runs it again", self.name, key)
            return
        self.queue.forget(key)
        with self._lock:
            self.runs += 1
            self.errors.pop(key, None)
