"""A bounded cache of parsed files and their schema problems, keyed by content.

A git blob never changes, so what was read from ``(path, blob sha)`` stays true: a
long-running reader (config-sync) that re-reads a 2,000-file commit in which one file
changed parses and schema-checks that one file. Entries are shared between readings:
nobody may mutate a cached document's data (the renderer and rules only read it). The
renderer keeps its items here too, keyed by everything an item is made of (``render.py``).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Hashable
from typing import Any


class ReadCache:
    """Least-recently-used maps, safe to share between threads: one of ``max_entries`` for
    what is made of one file or item, one of ``max_large`` for what is made of a whole
    environment or folder (``put(..., large=True)``: each of those holds a part of the
    repository, so they are kept by the hundred, not by the ten thousand)."""

    def __init__(self, max_entries: int = 50_000, max_large: int = 1024) -> None:
        self.max_entries = max_entries
        self.max_large = max_large
        self._entries: OrderedDict[Hashable, Any] = OrderedDict()
        self._large: OrderedDict[Hashable, Any] = OrderedDict()
        self._lock = threading.Lock()
        self.hits = self.misses = 0

    def get(self, key: Hashable, *, large: bool = False) -> Any | None:
        """The value kept under ``key`` (in the bound ``put`` kept it in), or None."""
        entries = self._large if large else self._entries
        with self._lock:
            value = entries.get(key)
            if value is None:
                self.misses += 1
                return None
            entries.move_to_end(key)
            self.hits += 1
            return value

    def put(self, key: Hashable, value: Any, *, large: bool = False) -> None:
        entries, limit = (self._large, self.max_large) if large else (self._entries, self.max_entries)
        with self._lock:
            entries[key] = value
            entries.move_to_end(key)
            while len(entries) > limit:
                entries.popitem(last=False)

    def __len__(self) -> int:
        return len(self._entries) + len(self._large)
