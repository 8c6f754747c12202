"""Anti-entropy: the broker is held to what config-sync published, not to its PUBACKs.

A PUBACK says the broker received a message, not that it stored it: a clustered broker
whose retained-message stream loses its leader mid-write acknowledges an update and never
stores it (NATS logs ``unable to store retained message``), and a node that comes back
serves an older retained set for a while. So after each publication (the subtrees it
changed) and every ``PHRAME_ANTI_ENTROPY_S`` (the whole desired plane), and soon after a
reconnect, :class:`AntiEntropy` has :meth:`DesiredPublisher.verify` read the plane back and
send again what differs. A read-back that a publication overlapped is retried shortly;
a broker that cannot be read is retried with backoff. A broker node that keeps serving
the same topics otherwise after each re-send (``STALE_PASSES`` passes in a row) stores
nothing for its readers: ``on_stale`` hears of it once (the service leaves that node for
the next URL of its list). Runs on one
:class:`~phrame.runtime.BackgroundLoop`; never blocks a publication longer than one
re-send of what differs.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from config_sync.errors import PublishError
from config_sync.publication.sender import DesiredPublisher, SyncOutcome, Verified
from phrame.runtime import BackgroundLoop, backoff
from schemas import Topics

log = logging.getLogger(__name__)
MAX_FILTERS = 8  # more changed subtrees than this: read the whole plane once instead
OVERLAP_RETRY_S = 0.5
AFTER_RECONNECT_S = 2.0  # a broker node that just came back may serve a partial set at first
STALE_PASSES = 3  # the same topics sent again this many passes in a row: the node serves a stale set


class AntiEntropy:
    def __init__(
        self,
        publisher: DesiredPublisher,
        topics: Topics,
        *,
        interval_s: float,
        settle_s: float = 0.3,
        on_verified: Callable[[Verified], None] | None = None,
        on_stale: Callable[[list[str]], None] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.publisher, self.topics = publisher, topics
        self.interval_s, self.settle_s = interval_s, settle_s
        self.on_verified = on_verified
        self.on_stale = on_stale
        self._resent: dict[str, int] = {}  # topic -> passes in a row that sent it again
        self.clock = clock
        self._lock = threading.Lock()
        self._pending: set[str] = set()  # topic filters to verify soon
        self._full_at = clock() + interval_s  # when the whole plane is verified next
        self._failures = 0
        self.passes = 0
        self._loop = BackgroundLoop("config-sync-anti-entropy", self.tick, wait_first_s=interval_s)

    def start(self) -> None:
        self._loop.start()

    def stop(self) -> None:
        self._loop.stop()

    def after(self, outcome: SyncOutcome) -> None:
        """A publication went out: verify the subtrees it changed, now."""
        if not outcome.messages:
            return
        filters = {self.topics.desired_node_filter(node) for node in outcome.changed_nodes}
        filters |= {f"{self.topics.environment(env)}/#" for env in outcome.environments}
        with self._lock:
            self._pending |= filters
        self._loop.wake()

    def full_soon(self, delay_s: float = AFTER_RECONNECT_S) -> None:
        """Verify the whole plane within ``delay_s`` (after a reconnect or a failover)."""
        with self._lock:
            self._full_at = min(self._full_at, self.clock() + delay_s)
        self._loop.wake()

    def tick(self) -> float | None:
        now = self.clock()
        with self._lock:
            pending, self._pending = self._pending, set()
            full = now >= self._full_at or len(pending) > MAX_FILTERS
        if not full and not pending:
            return self._wait()
        if self.publisher.published is None and not full:
            return self._retry(pending, OVERLAP_RETRY_S)  # not rebuilt yet: nothing to hold it to
        try:
            result = self.publisher.verify(None if full else sorted(pending), settle=self.settle_s)
        except PublishError as e:
            self._failures += 1
            delay = backoff(self._failures, base=1.0, cap=min(60.0, self.interval_s))
            log.warning("anti-entropy: %s; again in %.0f s", e, delay)
            return self._retry(pending, delay, full=full)
        self._failures = 0
        if result.overlapped:  # a publication ran meanwhile: its own pass follows
            return self._retry(pending, OVERLAP_RETRY_S, full=full)
        self.passes += 1
        if full:
            with self._lock:
                self._full_at = self.clock() + self.interval_s
        if self.on_verified is not None:
            self.on_verified(result)
        self._note_resent(result.repaired)
        return self._wait()

    def _note_resent(self, repaired: list[str]) -> None:
        """Count the passes in a row that sent each topic again; the node read from stores
        none of them once a topic reaches STALE_PASSES: ``on_stale``, and the count restarts."""
        self._resent = {t: self._resent.get(t, 0) + 1 for t in repaired}
        stuck = sorted(t for t, n in self._resent.items() if n >= STALE_PASSES)
        if stuck and self.on_stale is not None:
            self._resent = {}
            self.on_stale(stuck)

    def _retry(self, pending: set[str], delay: float, *, full: bool = False) -> float:
        with self._lock:
            self._pending |= pending
            if full:
                self._full_at = min(self._full_at, self.clock() + delay)
        return delay

    def _wait(self) -> float:
        with self._lock:
            if self._pending:
                return 0.0
            return max(0.0, self._full_at - self.clock())
