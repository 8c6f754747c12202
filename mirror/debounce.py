"""When to write the next snapshot: the pure debounce decision of the mirror loop.

Called by :class:`mirror.loop.MirrorLoop` with its monotonic clock; unit-tested with a fake
one. It never sleeps, reads a clock or touches a file.
"""

from __future__ import annotations


def wait_before_flush(
    now: float,
    last_change: float | None,
    first_unflushed: float | None,
    *,
    debounce_s: float,
    max_delay_s: float,
    not_before: float = 0.0,
) -> float | None:
    """Seconds to wait before writing (0.0: write now); ``None``: nothing to write.

    Due when the plane has been quiet for ``debounce_s`` since ``last_change``, or at the
    latest ``max_delay_s`` after ``first_unflushed`` (a storm that never goes quiet still
    gets a snapshot every max delay). ``not_before`` (a failed write's retry time) holds
    the write back however due it is, so a full disk is not hammered in a busy loop.
    """
    if first_unflushed is None:
        return None
    quiet_due = (last_change if last_change is not None else first_unflushed) + debounce_s
    storm_due = first_unflushed + max_delay_s
    due = max(min(quiet_due, storm_due), not_before)
    return max(0.0, due - now)
