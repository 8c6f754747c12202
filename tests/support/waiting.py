"""The one bounded wait of the test suite: poll until a condition holds, or fail saying why.

Tests and domain helpers (the dev stack, the agent's MQTT watcher) wait through
:func:`wait_for` instead of sleeping: a wait ends as soon as the awaited progress is
observable and, when it never comes, fails with what was awaited and the last value seen.
It never sleeps longer than ``interval`` at a time and never swallows the condition's errors;
``pause`` (an event's wait, say) lets news of progress end a pause early.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def wait_for(
    condition: Callable[[], T],
    what: str,
    timeout: float = 10.0,
    *,
    interval: float = 0.02,
    observe: Callable[[], object] | None = None,
    pause: Callable[[float], object] = time.sleep,
) -> T:
    """Poll ``condition`` until it returns a truthy value and return that value.

    Raises AssertionError after ``timeout`` seconds naming ``what`` and the last value
    observed: ``observe()`` when given (state more telling than a bare False), otherwise
    the condition's own last result. Between two looks it calls ``pause(interval)``, which
    may return sooner: when something the condition reads has changed.
    """
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() >= deadline:
            last = observe() if observe is not None else value
            raise AssertionError(f"timed out after {timeout:g} s waiting for {what}; last observed: {last!r}")
        pause(interval)
