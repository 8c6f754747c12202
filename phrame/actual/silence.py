"""When each node was not reporting, on the receiver's clock: what a rollout's deadline leaves out.

Fed by :class:`phrame.actual.view.ActualView` with every live heartbeat and item report
(a retained message is no news and never counts); read by config-sync's rollouts through
:meth:`ActualView.silent`. Never reads a clock itself.
"""

from __future__ import annotations

import math
import threading

MAX_GAPS = 128  # silences kept per node: far more than any deadline spans


class NodeSilence:
    """When each node was not reporting. A node reports for ``grace_s`` after each live message
    (the view's node timeout, the rule that calls a node offline) and is silent before its
    first one since the view started; a retained message is no news and never counts."""

    def __init__(self, grace_s: float) -> None:
        self.grace_s = grace_s
        self._first: dict[str, float] = {}  # node -> its first live message
        self._last: dict[str, float] = {}  # node -> its latest live message
        self._gaps: dict[str, list[tuple[float, float]]] = {}  # node -> closed silences [from, to)
        self._lock = threading.Lock()

    def heard(self, node: str, at: float) -> None:
        with self._lock:
            last = self._last.get(node)
            if last is None:
                self._first[node] = at
            elif at - last > self.grace_s:
                gaps = self._gaps.setdefault(node, [])
                gaps.append((last + self.grace_s, at))
                del gaps[:-MAX_GAPS]
            if last is None or at > last:
                self._last[node] = at

    def silent(self, node: str, since: float, now: float) -> float:
        """Seconds of ``[since, now]`` during which ``node`` was not reporting."""
        if now <= since:
            return 0.0
        with self._lock:
            first, last = self._first.get(node), self._last.get(node)
            gaps = list(self._gaps.get(node, ()))
        if first is None or last is None:
            return now - since  # not heard since config-sync started
        spans = [(-math.inf, first), *gaps, (last + self.grace_s, math.inf)]
        return sum(max(0.0, min(b, now) - max(a, since)) for a, b in spans)
