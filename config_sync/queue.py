"""Coalescing work queues: one worker thread per tracked ref (and one for reviews).

The app only calls :meth:`Worker.trigger` and returns. A worker runs one job at a time;
any number of triggers for a key while a job runs leaves exactly one more run of that
key, which re-reads the current head (level-triggered, DESIGN §5); ``debounce_s`` holds
a new trigger that long so a burst coalesces even before the first run; ``max_pending``
bounds the distinct keys waiting (a new key beyond it is refused, a pending one still
takes its latest job). A failed job is logged and counted; the worker never dies.
``poll_s`` re-runs the poll job when idle.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

log = logging.getLogger(__name__)

Job = Callable[[], object]  # the result is ignored


class Worker:
    """One thread draining a map of key → latest job; the same key coalesces."""

    def __init__(
        self,
        name: str,
        *,
        poll: Job | None = None,
        poll_s: float | None = None,
        debounce_s: float = 0.0,
        max_pending: int | None = None,
    ) -> None:
        self.name = name
        self.max_pending = max_pending
        self._poll, self._poll_s = poll, poll_s
        self._debounce_s = debounce_s
        self._pending: dict[str, tuple[Job, float]] = {}  # key -> (latest job, first trigger)
        self._cond = threading.Condition()
        self._stopping = False
        self._busy = False
        self.runs = 0
        self.failures = 0
        self.last_error: str | None = None
        self._thread = threading.Thread(target=self._loop, name=f"config-sync-{name}", daemon=True)

    def start(self) -> Worker:
        self._thread.start()
        return self

    def trigger(self, key: str, job: Job, *, max_pending: int | None = None) -> bool:
        """Queue ``job`` under ``key``, replacing a pending job of the same key; never blocks.
        False (nothing queued) when ``key`` is new and ``max_pending`` keys already wait."""
        limit = max_pending if max_pending is not None else self.max_pending
        with self._cond:
            if limit is not None and key not in self._pending and len(self._pending) >= limit:
                return False
            first = self._pending[key][1] if key in self._pending else time.monotonic()
            self._pending[key] = (job, first)
            self._cond.notify_all()
        return True

    @property
    def queued(self) -> int:
        with self._cond:
            return len(self._pending)

    def is_alive(self) -> bool:
        return self._thread.is_alive()

    def is_current(self) -> bool:
        """Whether the caller runs on this worker's thread (inside one of its jobs)."""
        return self._thread is threading.current_thread()

    def is_idle(self) -> bool:
        with self._cond:
            return not self._pending and not self._busy

    def wait_idle(self, timeout: float) -> bool:
        """Until nothing is pending or running (for tests and shutdown)."""
        with self._cond:
            return self._cond.wait_for(lambda: not self._pending and not self._busy, timeout)

    def stop(self, timeout: float = 10.0) -> None:
        """Stop taking work; wait up to ``timeout`` for a running job (0: do not wait,
        which is also what a worker stopping itself from its own job gets)."""
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
        if timeout > 0 and self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(timeout)

    def _next(self) -> Job | None:
        deadline = time.monotonic() + self._poll_s if self._poll_s else None
        with self._cond:
            while not self._pending and not self._stopping:
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    self._busy = self._poll is not None
                    return self._poll
                self._cond.wait(remaining)
            # a short quiet period gathers a burst (GitLab sends push and MR hooks together)
            key = next(iter(self._pending), None)
            while key is not None and not self._stopping:
                wait = self._pending[key][1] + self._debounce_s - time.monotonic()
                if wait <= 0:
                    break
                self._cond.wait(wait)
            if self._stopping or key is None:
                return None
            self._busy = True
            return self._pending.pop(key)[0]

    def _loop(self) -> None:
        while True:
            job = self._next()
            if job is None:
                with self._cond:
                    if self._stopping:
                        return
                continue
            try:
                job()
                self.runs += 1
            except Exception as e:  # the loop never dies from one pass
                self.failures += 1
                self.last_error = f"{type(e).__name__}: {e}"
                log.exception("worker %s: a pass failed; the next trigger or poll retries", self.name)
            finally:
                with self._cond:
                    self._busy = False
                    self._cond.notify_all()


class WorkQueue:
    """The workers of one config-sync: ``ref:<branch>`` per tracked ref, ``reviews`` for MRs."""

    def __init__(self, *, poll_s: float | None = None, debounce_s: float = 0.0) -> None:
        self.poll_s = poll_s
        self.debounce_s = debounce_s
        self.workers: dict[str, Worker] = {}
        self._retired: list[Worker] = []  # stopped, maybe still ending a job: joined by stop()
        self._lock = threading.Lock()
        self._stopped = False

    def worker(self, name: str, *, poll: Job | None = None) -> Worker:
        with self._lock:
            if self._stopped:
                raise RuntimeError("work queue stopped")
            if name not in self.workers:
                poll_s = self.poll_s if poll is not None else None
                worker = Worker(name, poll=poll, poll_s=poll_s, debounce_s=self.debounce_s)
                self.workers[name] = worker.start()
            return self.workers[name]

    def names(self) -> list[str]:
        with self._lock:
            return sorted(self.workers)

    def retire(self, name: str, *, only_if: Worker | None = None) -> bool:
        """Stop and forget the worker ``name`` (its poll too) without waiting for its job;
        safe from that worker's own job. ``worker(name)`` later starts a new one.
        ``only_if``: retire it only if it is still that very worker (a job of a worker
        retired before must not stop the new worker of the same name)."""
        with self._lock:
            worker = self.workers.get(name)
            if worker is None or (only_if is not None and worker is not only_if):
                return False
            del self.workers[name]
            self._retired = [w for w in self._retired if w.is_alive()] + [worker]
        worker.stop(timeout=0)
        log.info("worker %s retired", name)
        return True

    def wait_idle(self, timeout: float) -> bool:
        """Until every worker is idle, including workers a finishing job just added."""
        deadline = time.monotonic() + timeout
        while True:
            workers = list(self.workers.values())
            if not all(w.wait_idle(max(0.0, deadline - time.monotonic())) for w in workers):
                return False
            if len(self.workers) == len(workers) and all(w.is_idle() for w in workers):
                return True

    def stop(self) -> None:
        with self._lock:
            self._stopped = True
            workers = list(self.workers.values()) + self._retired
        for w in workers:
            w.stop()
