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
    first_beat_unflushed: float | None = None,
    beat_delay_s: float | None = None,
) -> float | None:
    """Seconds to wait before writing (0.0: write now); ``None``: nothing to write.

    Due when the plane has been quiet for ``debounce_s`` since ``last_change``, or at the
    latest ``max_delay_s`` after ``first_unflushed`` (a storm that never goes quiet still
    gets a snapshot every max delay). ``not_before`` (a failed write's retry time) holds
    the write back however due it is, so a full disk is not hammered in a busy loop.

    Heartbeats are no change here (they never stop, so the plane would never be quiet and
    the whole snapshot would be written every ``max_delay_s``): ``first_beat_unflushed``,
    the first heartbeat not in a snapshot yet, makes a write due ``beat_delay_s`` after it
    (any earlier write carries it too).
    """
    dues = []
    if first_unflushed is not None:
        quiet_due = (last_change if last_change is not None else first_unflushed) + debounce_s
        dues.append(min(quiet_due, first_unflushed + max_delay_s))
    if first_beat_unflushed is not None and beat_delay_s is not None:
        dues.append(first_beat_unflushed + beat_delay_s)
    if not dues:
        return None
    due = max(min(dues), not_before)
    return max(0.0, due - now)
