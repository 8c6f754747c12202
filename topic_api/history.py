"""Each node's recent heartbeats (host stats), kept in memory for the dashboard's charts.

:class:`topic_api.state.ApiState` records a heartbeat when the actual snapshot shows a new
one; ``/api/nodes`` lists them oldest first. Each entry keeps the node's own ``ts`` and
``at``, when this API received it: entries age by ``at`` on the API's clock, so a node whose
clock is off keeps a chart (neither emptied nor kept forever). Bounded: entries received
more than ``keep_s`` ago are dropped at each record and read, and at most ``max_entries``
per node are kept (a node beating faster than its interval cannot grow it). Never reads a
clock: callers pass ``now``.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping
from typing import Any

from topic_api.models import HistoryEntry


def _number(value: Any) -> float | None:
    return value if isinstance(value, int | float) and not isinstance(value, bool) else None


class HeartbeatHistory:
    def __init__(self, keep_s: float = 600.0, max_entries: int = 1200) -> None:
        self.keep_s = keep_s
        self.max_entries = max_entries
        self._nodes: dict[str, deque[HistoryEntry]] = {}

    def record(self, node: str, heartbeat: Any, now: float) -> None:
        """Add ``heartbeat`` (a heartbeat payload) unless malformed or already recorded."""
        if not isinstance(heartbeat, Mapping) or not isinstance(heartbeat.get("host"), Mapping):
            return
        ts = heartbeat.get("ts")
        if not isinstance(ts, int | float) or isinstance(ts, bool):
            return
        host = heartbeat["host"]
        entry = HistoryEntry(
            ts=float(ts),
            at=now,
            cpu_percent=_number(host.get("cpu_percent")),
            mem_used=_number(host.get("mem_used")),
            mem_total=_number(host.get("mem_total")),
            disk_used=_number(host.get("disk_used")),
            disk_total=_number(host.get("disk_total")),
        )
        entries = self._nodes.setdefault(node, deque(maxlen=self.max_entries))
        if entries and entries[-1]["ts"] == entry["ts"]:
            return  # the same heartbeat seen again (a node's clock may step back: kept)
        entries.append(entry)
        self._prune(entries, now)

    def of(self, node: str, now: float) -> list[HistoryEntry]:
        entries = self._nodes.get(node)
        if not entries:
            return []
        self._prune(entries, now)
        return list(entries)

    def forget_missing(self, nodes: set[str]) -> None:
        """Drop the history of nodes no snapshot names any more."""
        for node in set(self._nodes) - nodes:
            del self._nodes[node]

    def _prune(self, entries: deque[HistoryEntry], now: float) -> None:
        while entries and entries[0]["at"] < now - self.keep_s:
            entries.popleft()
