"""A TEST-ONLY offset of the agent's wall clock, to play a node whose clock is off.

:meth:`node_agent.reporting.ActualReporter.heartbeat` (the heartbeat's ``ts``) and
:mod:`node_agent.processes` (process start times) read the time through :func:`wall_time`.
With ``PHRAME_TEST_CLOCK_OFFSET_S`` set to a number of seconds, the agent's clock reads that
much ahead (negative: behind), so the fault suite (``tests/faults/test_7_clock.py``) can run
one node skewed on a host whose clock it must not change (libfaketime 0.9.10 breaks
Python's ``time.sleep``). Unset (always, outside tests) it is ``time.time()``. It never
shifts a monotonic clock (timers, backoffs) and never reads anything but its variable.
"""

from __future__ import annotations

import os
import time

ENV = "PHRAME_TEST_CLOCK_OFFSET_S"


def _offset() -> float:
    raw = os.environ.get(ENV, "").strip()
    if not raw:
        return 0.0
    try:
        return float(raw)
    except ValueError:
        raise ValueError(
            f"{ENV}={raw!r} is not a number of seconds (a test-only setting: unset it)"
        ) from None


OFFSET_S = _offset()  # read once: a bad value stops the agent at start, naming the variable


def wall_time() -> float:
    """``time.time()``, plus the test-only offset when one is set."""
    return time.time() + OFFSET_S
