"""Python's cyclic garbage collector held off while a sync runs.

An incremental sync allocates enough to trigger the collector's older generations, whose
pauses (10–14 ms, a tenth of the sync) walk every object config-sync holds. While any
thread is inside :func:`gc_paused` the collector is disabled; when the last one leaves, it
is enabled again (if it was enabled when the first entered) and collects the youngest
generation once, so what the sync left cyclic is freed off the sync's path. Nothing is
frozen: every object stays collectable.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

_lock = threading.Lock()
_inside = 0
_was_enabled = False


@contextmanager
def gc_paused() -> Iterator[None]:
    """Hold the cyclic collector off for the body (nested and concurrent uses count)."""
    global _inside, _was_enabled
    with _lock:
        if _inside == 0:
            _was_enabled = gc.isenabled()
            gc.disable()
        _inside += 1
    try:
        yield
    finally:
        with _lock:
            _inside -= 1
            resume = _inside == 0 and _was_enabled
            if resume:
                gc.enable()
        if resume:
            gc.collect(0)
