"""Pulling ahead of a rollout's wave: the images config-sync names on ``prefetch/<env>``.

The loop hands :meth:`Prefetcher.want` the images of the node's ``prefetch`` topics on every
pass; each one not asked for before is pulled on a worker of its own (``ensure_image``: only
when missing), at most ``PHRAME_PULL_PARALLELISM`` pulls at a time on the node, counting the
pulls of the passes (:class:`PullSlots`). :meth:`Prefetcher.report` is the status's
``prefetch`` field (``pulling``, ``pulled``, ``failed`` with the error); a finished pull calls
``on_change`` (the loop's wake) so the status goes out. It never touches a container, and it
never removes an image (several nodes' agents may share one daemon: an image one pulls may
be another's running one).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from node_agent.errors import printable

log = logging.getLogger(__name__)
MAX_ERROR = 2000  # the status schema's bound on ``error``


class PullSlots:
    """The node's bound on concurrent pulls: prefetches and a pass's ``pull_image`` share it."""

    def __init__(self, parallelism: int) -> None:
        self.parallelism = max(1, parallelism)
        self._slots = threading.BoundedSemaphore(self.parallelism)

    @contextmanager
    def held(self) -> Iterator[None]:
        with self._slots:
            yield


@dataclass(frozen=True)
class Pull:
    state: str  # pulling | pulled | failed
    error: str | None = None
    seconds: float | None = None

    def to_doc(self) -> dict[str, Any]:
        doc: dict[str, Any] = {"state": self.state}
        if self.error is not None:
            doc["error"] = self.error
        if self.seconds is not None:
            doc["seconds"] = round(self.seconds, 3)
        return doc


class Prefetcher:
    def __init__(
        self,
        ensure_image: Callable[[str], None],
        slots: PullSlots,
        *,
        on_change: Callable[[], None] = lambda: None,
        timer: Callable[[], float] = time.monotonic,
    ) -> None:
        self.ensure_image = ensure_image
        self.slots = slots
        self.on_change = on_change
        self.timer = timer
        self._lock = threading.Lock()
        self._pulls: dict[str, Pull] = {}
        self._wanted: set[str] = set()
        self._pool = ThreadPoolExecutor(slots.parallelism, thread_name_prefix="agent-prefetch")

    def want(self, images: Iterable[str]) -> None:
        """The images asked for now: new ones are pulled; those no longer asked for are
        forgotten once done (a failed one is tried again only when asked for anew)."""
        start = []
        with self._lock:
            self._wanted = set(images)
            for image in list(self._pulls):
                if image not in self._wanted and self._pulls[image].state != "pulling":
                    del self._pulls[image]
            for image in sorted(self._wanted - set(self._pulls)):
                self._pulls[image] = Pull("pulling")
                start.append(image)
        for image in start:
            log.info("pulling %s ahead of its rollout wave", image)
            self._pool.submit(self._pull, image)

    def report(self) -> dict[str, dict[str, Any]]:
        """The status's ``prefetch``: each image asked for and how far its pull is."""
        with self._lock:
            return {i: p.to_doc() for i, p in sorted(self._pulls.items()) if i in self._wanted}

    def _pull(self, image: str) -> None:
        started = self.timer()
        try:
            with self.slots.held():
                self.ensure_image(image)
        except Exception as e:  # any failure is the image's, reported; the worker goes on
            pull = Pull("failed", printable(str(e))[:MAX_ERROR], self.timer() - started)
            log.warning("pulling %s ahead of its wave failed: %s", image, pull.error)
        else:
            pull = Pull("pulled", None, self.timer() - started)
            log.info("pulled %s ahead of its wave in %.1f s", image, pull.seconds)
        with self._lock:
            if image in self._pulls:
                self._pulls[image] = pull
            if image not in self._wanted:
                self._pulls.pop(image, None)
        try:
            self.on_change()
        except Exception:  # the wake of a stopping loop
            log.debug("prefetch of %s: on_change failed", image, exc_info=True)

    def stop(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
