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
    """Least-recently-used map, safe to share between threads."""

    def __init__(self, max_entries: int = 50_000) -> None:
        self.max_entries = max_entries
        self._entries: OrderedDict[Hashable, Any] = OrderedDict()
        self._lock = threading.Lock()
        self.hits = self.misses = 0

    def get(self, key: Hashable) -> Any | None:
        with self._lock:
            value = self._entries.get(key)
            if value is None:
                self.misses += 1
                return None
            self._entries.move_to_end(key)
            self.hits += 1
            return value

    def put(self, key: Hashable, value: Any) -> None:
        with self._lock:
            self._entries[key] = value
            self._entries.move_to_end(key)
            while len(self._entries) > self.max_entries:
                self._entries.popitem(last=False)

    def __len__(self) -> int:
        return len(self._entries)
