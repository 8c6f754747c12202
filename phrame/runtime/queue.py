"""A keyed, delaying, rate-limited work queue (Kubernetes' workqueue, for threads).

Event handlers only :meth:`WorkQueue.add` a key and return; workers (:class:`~phrame.runtime.Runner`)
take keys with :meth:`WorkQueue.get` and hand them back with :meth:`WorkQueue.done`. A key is
queued at most once: adding it again while it waits only brings its time forward; adding it
while a worker holds it marks it dirty, and it is queued again when that worker is done, so
one key never runs on two workers at once. A failed key is re-added with :meth:`retry` after
a per-key backoff (its failures in a row, reset by :meth:`forget`); ``resync`` keys are added
once no key has finished for ``resync_s``. Time is the injected ``clock``: tests move a
fake one and call :meth:`wake`, and never sleep for a backoff. Never runs work itself.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass
from typing import Generic, TypeVar

from phrame.runtime.retry import Backoff

K = TypeVar("K", bound=Hashable)
Clock = Callable[[], float]
#: the longest a wait blocks at a time. A signal (SIGTERM) the kernel delivers to another
#: thread reaches Python's handler only when the main thread runs again: a main thread
#: blocked without a timeout would never stop (seen: placement ignoring SIGTERM)
SIGNAL_CHECK_S = 1.0


@dataclass
class _Entry:
    due: float  # clock time from which it may run
    retry: bool  # put there by a failure (scheduled work), not by new input


class WorkQueue(Generic[K]):
    def __init__(
        self,
        *,
        backoff: Backoff | None = None,
        clock: Clock = time.monotonic,
        resync_s: float | None = None,
        resync: Callable[[], Iterable[K]] | None = None,
    ) -> None:
        self.backoff = backoff or Backoff()
        self.clock = clock
        # called with the queue's lock held: it only names keys, never calls the queue
        self._resync, self._resync_s = resync, resync_s if resync is not None else None
        self._resync_at = clock() + self._resync_s if self._resync_s else None
        self._queued: dict[K, _Entry] = {}
        self._dirty: dict[K, _Entry] = {}  # added while a worker holds the key
        self._processing: set[K] = set()
        self._failures: dict[K, int] = {}
        self._cond = threading.Condition()
        self._shut = False

    # -- input (any thread; never blocks on work)
    def add(self, key: K, delay: float = 0.0, *, limit: int | None = None, postpone: bool = False) -> bool:
        """Queue ``key`` to run after ``delay`` (or sooner, if it waits already); False only
        when ``key`` waits nowhere yet and ``limit`` keys already wait, or after shutdown.
        New input runs at its own time even while a retry of the key waits (it may be the fix).
        ``postpone`` (a trailing debounce): new input that waits already waits ``delay`` from
        now, even if that is later than its time (a retry's earlier time still holds)."""
        with self._cond:
            if self._shut:
                return False
            return self._put(key, self.clock() + delay, retry=False, limit=limit, postpone=postpone)

    def retry(self, key: K, delay: float | None = None) -> tuple[int, float]:
        """Count a failure of ``key`` and queue it again after ``delay``, else after the
        backoff of its failures in a row; (failures in a row, delay). New input that waits
        for the key already keeps its own, earlier time."""
        with self._cond:
            n = self._failures[key] = self._failures.get(key, 0) + 1
            wait = self.backoff.delay(n) if delay is None else max(0.0, delay)
            if not self._shut:
                self._put(key, self.clock() + wait, retry=True, limit=None)
            return n, wait

    def forget(self, key: K) -> None:
        """``key`` succeeded (or failed for good): its next failure starts the backoff over."""
        with self._cond:
            self._failures.pop(key, None)

    def wake(self) -> None:
        """Look at the due times again (after a test moved its fake clock)."""
        with self._cond:
            self._cond.notify_all()

    def _put(self, key: K, due: float, *, retry: bool, limit: int | None, postpone: bool = False) -> bool:
        target = self._dirty if key in self._processing else self._queued
        held = target.get(key)
        if held is None:
            if limit is not None and len(self._queued) + len(self._dirty) >= limit:
                return False
            target[key] = _Entry(due, retry)
        elif not retry:
            target[key] = _Entry(due if postpone and not held.retry else min(due, held.due), False)
        # else: a retry never postpones nor replaces what already waits for the key
        self._cond.notify_all()
        return True

    # -- workers
    def get(self, *, block: bool = True) -> K | None:
        """Block until a key is due, the earliest first, and hold it for the caller until
        :meth:`done`; None once the queue is shut down (or, not ``block``ing, if none is due)."""
        with self._cond:
            while not self._shut:
                now = self.clock()
                if self._resync_at is not None and now >= self._resync_at:
                    assert self._resync is not None and self._resync_s is not None
                    for each in self._resync():
                        self._put(each, now, retry=False, limit=None)
                    self._resync_at = now + self._resync_s
                first = min(self._queued, key=lambda k: self._queued[k].due, default=None)
                due = self._queued[first].due if first is not None else None
                if first is not None and due is not None and due <= now:
                    del self._queued[first]
                    self._processing.add(first)
                    return first
                if not block:
                    return None
                times = [t for t in (self._resync_at, due) if t is not None]
                self._cond.wait(min(SIGNAL_CHECK_S, max(0.0, min(times) - now)) if times else SIGNAL_CHECK_S)
            return None

    def done(self, key: K) -> None:
        """The worker is finished with ``key``: queued again if it was added meanwhile."""
        with self._cond:
            self._processing.discard(key)
            dirty = self._dirty.pop(key, None)
            if dirty is not None:
                self._queued[key] = dirty
            if self._resync_s:  # a resync comes after a quiet period, not in the middle of work
                self._resync_at = self.clock() + self._resync_s
            self._cond.notify_all()

    def shutdown(self) -> None:
        """Stop handing out keys: every :meth:`get` returns None, now and later."""
        with self._cond:
            self._shut = True
            self._cond.notify_all()

    # -- reading
    def __len__(self) -> int:
        """Keys waiting to run, including retries and keys added while held."""
        with self._cond:
            return len(self._queued) + len(self._dirty)

    def failures(self) -> dict[K, int]:
        """Per key, its failures in a row (reset by :meth:`forget`)."""
        with self._cond:
            return dict(self._failures)

    def due(self, key: K) -> float | None:
        """When ``key`` runs next (the clock's time), or None if it waits nowhere."""
        with self._cond:
            held = self._queued.get(key) or self._dirty.get(key)
            return held.due if held is not None else None

    def retry_due(self, key: K) -> float | None:
        """When the retry of ``key`` runs (the clock's time), or None if none waits."""
        with self._cond:
            held = self._queued.get(key) or self._dirty.get(key)
            return held.due if held is not None and held.retry else None

    def _idle(self) -> bool:
        return not self._processing and all(e.retry for e in self._queued.values())

    def is_idle(self) -> bool:
        """Nothing held by a worker and nothing waiting but retries (scheduled work)."""
        with self._cond:
            return self._idle()

    def wait_idle(self, timeout: float) -> bool:
        """Until :meth:`is_idle` (real seconds; for tests and orderly stops)."""
        with self._cond:
            return self._cond.wait_for(self._idle, timeout)
