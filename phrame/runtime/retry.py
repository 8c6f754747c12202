"""The retry vocabulary of every control loop: two errors and one backoff.

A ``sync(key)`` run by :class:`~phrame.runtime.Runner` raises :class:`TemporaryError` to be
run again (after its ``delay``, else after :func:`backoff` of the key's failures in a row)
and :class:`PermanentError` to be recorded and left until new input enqueues the key again.
:func:`backoff` is the one formula of waits between tries anywhere in phrame; never sleeps.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass

#: past this many doublings every delay is capped anyway; keeps ``2 ** n`` a small float
_MAX_DOUBLINGS = 62


class TemporaryError(Exception):
    """A try failed for a reason that may pass (a broker or remote away, a race lost):
    retried after ``delay`` seconds if given, else with the key's backoff."""

    def __init__(self, message: str = "", delay: float | None = None) -> None:
        super().__init__(message)
        self.delay = delay


class PermanentError(Exception):
    """A try failed for a reason another try cannot fix (bad input, a refused write): recorded
    and not retried; the key runs again only when new input enqueues it. Where a class is
    both (a subclass of a temporary family that is permanent itself), permanent wins."""


def backoff(
    failures: int,
    *,
    base: float = 1.0,
    cap: float = 60.0,
    jitter: float = 0.0,
    rand: Callable[[], float] = random.random,
) -> float:
    """Seconds to wait before the try after ``failures`` failures in a row (1-based):
    ``base`` doubling up to ``cap``. ``jitter`` (0-1) takes up to that share off at random,
    so that many clients failing together do not come back together; never above ``cap``."""
    delay = min(cap, base * 2.0 ** min(max(failures - 1, 0), _MAX_DOUBLINGS))
    if jitter > 0:
        delay -= delay * min(jitter, 1.0) * rand()
    return delay


@dataclass(frozen=True)
class Backoff:
    """A :func:`backoff` with its figures fixed: ``min_s`` doubling up to ``max_s``."""

    min_s: float = 1.0
    max_s: float = 60.0
    jitter: float = 0.0

    def delay(self, failures: int) -> float:
        return backoff(failures, base=self.min_s, cap=self.max_s, jitter=self.jitter)


def is_temporary(error: BaseException) -> bool:
    """Whether a retry may help: a :class:`TemporaryError` that is not also permanent."""
    return isinstance(error, TemporaryError) and not isinstance(error, PermanentError)
