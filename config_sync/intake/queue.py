"""Coalescing work queues: one worker thread per tracked ref (and one for reviews).

The app only calls :meth:`Worker.trigger` and returns. A worker runs one job at a time;
any number of triggers for a key while a job runs leaves exactly one more run of that
key, which re-reads the current head (level-triggered, docs/architecture/contracts.md); ``debounce_s`` holds
a new trigger that long so a burst coalesces even before the first run; ``max_pending``
bounds the distinct keys waiting (a new key beyond it is refused, a pending one still
takes its latest job). A job failing with one of the ``transient`` errors is run again
after a capped exponential backoff per key (:class:`~config_sync.models.Backoff`, reset by a success, as
sample-controller's ``AddRateLimited``); any other failure is logged and waits for the
next trigger or poll. The worker never dies. ``poll_s`` re-runs the poll job when idle.
Time comes from ``clock`` (monotonic seconds), so tests drive backoff with a fake clock.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from config_sync.models import Backoff

log = logging.getLogger(__name__)

Job = Callable[[], object]  # the result is ignored
Clock = Callable[[], float]
DEFAULT_BACKOFF = Backoff()  # 1 s doubling up to 60 s


@dataclass
class _Pending:
    job: Job
    due: float  # monotonic time it may run
    retry: bool = False  # scheduled by a transient failure, not by a trigger


class Worker:
    """One thread draining a map of key → latest job; the same key coalesces."""

    def __init__(
        self,
        name: str,
        *,
        poll: Job | None = None,
        poll_s: float | None = None,
        poll_key: str = "poll",
        debounce_s: float = 0.0,
        max_pending: int | None = None,
        transient: tuple[type[BaseException], ...] = (),
        backoff: Backoff = DEFAULT_BACKOFF,
        clock: Clock = time.monotonic,
    ) -> None:
        self.name = name
        self.max_pending = max_pending
        self._poll, self._poll_s, self._poll_key = poll, poll_s, poll_key
        self._debounce_s = debounce_s
        self._transient, self.backoff, self._clock = transient, backoff, clock
        self._pending: dict[str, _Pending] = {}
        self._cond = threading.Condition()
        self._stopping = False
        self._busy = False
        self.runs = 0
        self.failures = 0
        self.last_error: str | None = None
        self.retries: dict[str, int] = {}  # key -> consecutive transient failures
        self._thread = threading.Thread(target=self._loop, name=f"config-sync-{name}", daemon=True)

    def start(self) -> Worker:
        self._thread.start()
        return self

    def trigger(self, key: str, job: Job, *, max_pending: int | None = None) -> bool:
        """Queue ``job`` under ``key``, replacing a pending job of the same key; never blocks.
        False (nothing queued) when ``key`` is new and ``max_pending`` keys already wait.
        A trigger runs at its own time even when a retry of ``key`` waits (it may bring a fix)."""
        limit = max_pending if max_pending is not None else self.max_pending
        with self._cond:
            if limit is not None and key not in self._pending and len(self._pending) >= limit:
                return False
            due = self._clock() + self._debounce_s
            held = self._pending.get(key)
            if held is not None and not held.retry:
                due = held.due  # the burst's first trigger sets the time
            elif held is not None:
                due = min(due, held.due)
            self._pending[key] = _Pending(job, due)
            self._cond.notify_all()
        return True

    def wake(self) -> None:
        """Look at the due times again now (after the clock moved, e.g. a test's fake clock)."""
        with self._cond:
            self._cond.notify_all()

    def retrying(self) -> dict[str, int]:
        """Per key, the transient failures in a row while its retry waits (for /status)."""
        with self._cond:
            return dict(self.retries)

    def retry_due(self, key: str) -> float | None:
        """When the retry of ``key`` runs (the clock's time), or None if none waits."""
        with self._cond:
            held = self._pending.get(key)
            return held.due if held is not None and held.retry else None

    @property
    def queued(self) -> int:
        with self._cond:
            return len(self._pending)

    def is_alive(self) -> bool:
        return self._thread.is_alive()

    def is_current(self) -> bool:
        """Whether the caller runs on this worker's thread (inside one of its jobs)."""
        return self._thread is threading.current_thread()

    def _idle(self) -> bool:  # a retry waiting for its time is scheduled work, like the poll
        return not self._busy and all(p.retry for p in self._pending.values())

    def is_idle(self) -> bool:
        with self._cond:
            return self._idle()

    def wait_idle(self, timeout: float) -> bool:
        """Until nothing is running or triggered (retries waiting do not count; for tests)."""
        with self._cond:
            return self._cond.wait_for(self._idle, timeout)

    def stop(self, timeout: float = 10.0) -> None:
        """Stop taking work; wait up to ``timeout`` for a running job (0: do not wait,
        which is also what a worker stopping itself from its own job gets)."""
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
        if timeout > 0 and self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(timeout)

    def _next(self) -> tuple[str, Job] | None:
        """The next job once due: the earliest pending key, else the poll; None when stopping."""
        deadline = self._clock() + self._poll_s if self._poll_s else None
        with self._cond:
            while not self._stopping:
                now = self._clock()
                key = min(self._pending, key=lambda k: self._pending[k].due, default=None)
                due = self._pending[key].due if key is not None else None
                if key is not None and due is not None and due <= now:
                    self._busy = True
                    return key, self._pending.pop(key).job
                if self._poll is not None and deadline is not None and now >= deadline:
                    held = self._pending.get(self._poll_key)
                    if held is not None and held.retry:
                        del self._pending[self._poll_key]  # the poll is that very retry, early
                    self._busy = True
                    return self._poll_key, self._poll
                waits = [t - now for t in (deadline, due) if t is not None]
                self._cond.wait(min(waits) if waits else None)
            return None

    def _loop(self) -> None:
        while True:
            picked = self._next()
            if picked is None:
                return
            key, job = picked
            try:
                job()
                self.runs += 1
                with self._cond:
                    self.retries.pop(key, None)
            except Exception as e:  # the loop never dies from one pass
                self._failed(key, job, e)
            finally:
                with self._cond:
                    self._busy = False
                    self._cond.notify_all()

    def _failed(self, key: str, job: Job, e: Exception) -> None:
        self.failures += 1
        self.last_error = f"{type(e).__name__}: {e}"
        if not isinstance(e, self._transient):
            with self._cond:
                self.retries.pop(key, None)
            log.exception("worker %s: a pass failed; the next trigger or poll retries", self.name)
            return
        with self._cond:
            n = self.retries[key] = self.retries.get(key, 0) + 1
            delay = self.backoff.delay(n)
            if key not in self._pending:  # a newer trigger already waits: it runs at its own time
                self._pending[key] = _Pending(job, self._clock() + delay, retry=True)
        log.warning("worker %s: %s failed (%s); retry %d in %g s", self.name, key, self.last_error, n, delay)


class WorkQueue:
    """The workers of one config-sync: ``ref:<branch>`` per tracked ref, ``reviews`` for MRs."""

    def __init__(
        self,
        *,
        poll_s: float | None = None,
        debounce_s: float = 0.0,
        transient: tuple[type[BaseException], ...] = (),
        backoff: Backoff = DEFAULT_BACKOFF,
        clock: Clock = time.monotonic,
    ) -> None:
        self.poll_s = poll_s
        self.debounce_s = debounce_s
        self.transient, self.backoff, self.clock = transient, backoff, clock
        self.workers: dict[str, Worker] = {}
        self._retired: list[Worker] = []  # stopped, maybe still ending a job: joined by stop()
        self._lock = threading.Lock()
        self._stopped = False

    def worker(self, name: str, *, poll: Job | None = None, poll_key: str = "poll") -> Worker:
        with self._lock:
            if self._stopped:
                raise RuntimeError("work queue stopped")
            if name not in self.workers:
                poll_s = self.poll_s if poll is not None else None
                worker = Worker(
                    name,
                    poll=poll,
                    poll_s=poll_s,
                    poll_key=poll_key,
                    debounce_s=self.debounce_s,
                    transient=self.transient,
                    backoff=self.backoff,
                    clock=self.clock,
                )
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
