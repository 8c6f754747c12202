"""Config-sync's workers: one :class:`phrame.runtime.Runner` per tracked ref (and one for reviews).

The app only calls :meth:`Worker.trigger` and returns. A worker runs one job at a time;
any number of triggers for a key while a job runs leaves exactly one more run of that
key, which re-reads the current head (level-triggered, docs/architecture/contracts.md);
``debounce_s`` is a leading-edge debounce: a trigger of a key that had no trigger and no run
for ``debounce_s`` runs at once (a push is one hook: its sync does not wait); any other
trigger is held until the key's triggers pause for ``debounce_s`` (each one starts the wait
again), at most ``HOLD_WINDOWS`` × ``debounce_s`` after the first trigger held, so a burst
makes its leading run and one more, and a stream that never pauses one run per longest hold;
``max_pending`` bounds the distinct keys waiting (a new key beyond it is refused, a pending
one still takes its latest job). A job raising a :class:`~phrame.runtime.TemporaryError`
(git, the broker) runs again after the key's backoff, reset by a success; any other failure
is logged and waits for the next trigger or poll. The poll runs ``poll_s`` after the
worker's last job. Never dies.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from phrame.runtime import Backoff, Clock, Runner

log = logging.getLogger(__name__)

Job = Callable[[], object]  # the result is ignored
DEFAULT_BACKOFF = Backoff()  # 1 s doubling up to 60 s
#: a held trigger runs at the latest this many debounce windows after the first one held
HOLD_WINDOWS = 4
_REMEMBERED = 1024  # keys whose last activity is kept (review keys come and go)


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
        backoff: Backoff = DEFAULT_BACKOFF,
        clock: Clock = time.monotonic,
    ) -> None:
        self.name = name
        self.max_pending = max_pending
        self.backoff = backoff
        self._poll, self._poll_key = poll, poll_key
        self._debounce_s = debounce_s
        self._clock = clock
        # key -> when it is quiet again: its last trigger's or run's end + debounce_s
        self._quiet_at: dict[str, float] = {}
        self._held_since: dict[str, float] = {}  # key -> the first trigger held since its last run
        self._jobs: dict[str, Job] = {}  # key -> its latest job; a key without one runs the poll
        self._lock = threading.Lock()
        resync = (lambda: (poll_key,)) if poll is not None and poll_s else None
        self.runner: Runner[str] = Runner(
            f"config-sync-{name}", self._run, backoff=backoff, clock=clock, resync_s=poll_s, resync=resync
        )
        self.queue = self.runner.queue

    def start(self) -> Worker:
        self.runner.start()
        return self

    def trigger(self, key: str, job: Job, *, max_pending: int | None = None) -> bool:
        """Queue ``job`` under ``key``, replacing a pending job of the same key; never blocks.
        False (nothing queued) when ``key`` is new and ``max_pending`` keys already wait.
        A trigger runs at its own time even when a retry of ``key`` waits (it may bring a fix)."""
        limit = max_pending if max_pending is not None else self.max_pending
        with self._lock:  # NOTE: before the queue's lock, never inside it (the resync takes only that)
            delay = self._delay(key)
            if not self.queue.add(key, delay, limit=limit, postpone=delay > 0):
                return False
            self._jobs[key] = job  # the worker waits for this lock before it reads the job
        return True

    def _delay(self, key: str) -> float:
        """How long a trigger of ``key`` waits (with ``_lock`` held): 0 when the key is quiet
        (no trigger, no run for ``debounce_s``), else until its triggers pause that long,
        within the longest hold."""
        if self._debounce_s <= 0:
            return 0.0
        now = self._clock()
        quiet = now >= self._quiet_at.get(key, now)
        self._quiet_at[key] = now + self._debounce_s
        if len(self._quiet_at) > _REMEMBERED:
            self._quiet_at = {k: t for k, t in self._quiet_at.items() if t > now}
        if quiet:
            return 0.0
        since = self._held_since.setdefault(key, now)
        return max(0.0, min(now + self._debounce_s, since + HOLD_WINDOWS * self._debounce_s) - now)

    def _run(self, key: str) -> None:
        with self._lock:
            job = self._jobs.pop(key, None)
            self._held_since.pop(key, None)  # what is held from now on waits for the next run
        job = job or (self._poll if key == self._poll_key else None)
        if job is None:
            return
        try:
            job()
        except Exception:
            with self._lock:  # a retry runs this job again, unless a newer one came meanwhile
                self._jobs.setdefault(key, job)
            raise
        finally:
            if self._debounce_s > 0:
                with self._lock:  # a trigger right after a run is the burst's tail: held
                    end = self._clock() + self._debounce_s
                    self._quiet_at[key] = max(self._quiet_at.get(key, end), end)

    # -- reading
    @property
    def runs(self) -> int:
        return self.runner.runs

    @property
    def failures(self) -> int:
        return self.runner.failures

    @property
    def last_error(self) -> str | None:
        return self.runner.last_error

    @property
    def retries(self) -> dict[str, int]:
        """Per key, the temporary failures in a row (reset by a success)."""
        return self.queue.failures()

    def retrying(self) -> dict[str, int]:
        """Per key, the temporary failures in a row while its retry waits (for /status)."""
        return self.queue.failures()

    def retry_due(self, key: str) -> float | None:
        """When the retry of ``key`` runs (the clock's time), or None if none waits."""
        return self.queue.retry_due(key)

    def wake(self) -> None:
        """Look at the due times again now (after the clock moved, e.g. a test's fake clock)."""
        self.queue.wake()

    @property
    def queued(self) -> int:
        return len(self.queue)

    def is_alive(self) -> bool:
        return self.runner.is_alive()

    def is_current(self) -> bool:
        """Whether the caller runs on this worker's thread (inside one of its jobs)."""
        return self.runner.is_current()

    def is_idle(self) -> bool:
        return self.queue.is_idle()

    def wait_idle(self, timeout: float) -> bool:
        """Until nothing is running or triggered (retries waiting do not count; for tests)."""
        return self.queue.wait_idle(timeout)

    def stop(self, timeout: float = 10.0) -> None:
        """Stop taking work; wait up to ``timeout`` for a running job (0: do not wait,
        which is also what a worker stopping itself from its own job gets)."""
        self.runner.stop(timeout)


class WorkQueue:
    """The workers of one config-sync: ``ref:<branch>`` per tracked ref, ``reviews`` for MRs."""

    def __init__(
        self,
        *,
        poll_s: float | None = None,
        debounce_s: float = 0.0,
        backoff: Backoff = DEFAULT_BACKOFF,
        clock: Clock = time.monotonic,
    ) -> None:
        self.poll_s = poll_s
        self.debounce_s = debounce_s
        self.backoff, self.clock = backoff, clock
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
