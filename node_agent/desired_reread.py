"""When the agent reads its desired subtree back from the broker, beside its subscription.

A subscription can go quiet without the connection dropping: a clustered broker's node
whose delivery of a subscription broke, or whose retained index lags (NATS; see
docs/operations/broker.md), serves the agent an older set or none of a publication. So the
loop asks :class:`DesiredReread` at each pass whether a retained read of the node's desired
topics is due: every ``period_s`` (``PHRAME_DESIRED_REREAD_S``; 0: never), and, while the
desired state waits for something (no manifest, an item newer than its manifest, an item
the manifest lists not received), after ``waiting_s`` and then with backoff up to the
period. Pure: the loop reads and feeds the store; this only decides when.
"""

from __future__ import annotations

from collections.abc import Callable

from phrame.runtime import backoff

WAITING_S = 5.0  # a state waiting this long for the rest of a publication is read again


class DesiredReread:
    def __init__(self, period_s: float, *, clock: Callable[[], float], waiting_s: float = WAITING_S) -> None:
        self.period_s, self.waiting_s, self.clock = period_s, min(waiting_s, period_s), clock
        self._last = clock()  # the subscription's own replay counts as the first read
        self._waiting_since: float | None = None
        self._tries = 0  # reads in a row that left the state waiting
        self.reads = 0

    def next_at(self) -> float | None:
        """When a read is due next (None: never)."""
        if self.period_s <= 0:
            return None
        at = self._last + self.period_s
        if self._waiting_since is not None:
            wait = backoff(self._tries + 1, base=self.waiting_s, cap=self.period_s)
            at = min(at, max(self._waiting_since + self.waiting_s, self._last + wait))
        return at

    def due(self, *, waiting: bool) -> bool:
        """Whether to read now, the desired state ``waiting`` for more (or not)."""
        now = self.clock()
        if not waiting:
            self._waiting_since, self._tries = None, 0
        elif self._waiting_since is None:
            self._waiting_since = now
        at = self.next_at()
        return at is not None and now >= at

    def read(self, *, waiting: bool) -> None:
        """A read was made (or tried); ``waiting``: the state still waits after it."""
        self._last = self.clock()
        self.reads += 1
        self._tries = self._tries + 1 if waiting else 0
