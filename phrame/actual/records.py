"""What the actual view holds: the facts of one node, one item report, one change.

Frozen dataclasses built by :class:`phrame.actual.view.ActualView` (and by tests for the pure
rule in :mod:`phrame.actual.judging`); every time is on the RECEIVER's clock except the
node's own ``ts``. Nothing here does I/O or reads a clock.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from schemas.node_health import NodeVerdict

#: How far a heartbeat's ``ts`` may be from the receiver's wall clock and still be latency
#: and jitter: a larger offset is worth a line, and a retained heartbeat that far ahead is
#: not trusted.
CLOCK_NOTE_S = 2.0

#: How a node's last heartbeat is taken.
#: ``live``: heard live, counts from its arrival; ``retained``: a copy sent before we
#: listened, dated by its ``ts`` (never later than its arrival); ``behind``: a retained copy
#: dated more than a timeout before its arrival, ``ahead``: one dated later than its
#: arrival: only the node's clock's word, so neither makes the node online.
Trust = Literal["live", "retained", "behind", "ahead"]


@dataclass(frozen=True)
class NodeFacts:
    """One node as heard. ``heard_at``: when its last heartbeat counts from (``None``: never,
    or only an untrusted retained one); ``offline_at``: when a will (a status ``offline``) or
    a resumed listen marked it offline and no heartbeat came since."""

    node: str
    heard_at: float | None = None
    trust: Trust | None = None  # of the last heartbeat, None: none at all
    received_at: float | None = None  # when the last heartbeat arrived
    ts: float | None = None  # the last heartbeat's own ``ts`` (the node's clock)
    dated_age_s: float | None = None  # how old its ``ts`` said it was on arrival (our wall clock)
    interval_s: float | None = None
    clock_offset_s: float | None = None  # its clock ahead (+) of ours, from a live heartbeat
    offline_at: float | None = None
    status: Mapping[str, Any] | None = None
    status_at: float | None = None  # when the status last changed its ``state``

    @property
    def is_heard_live(self) -> bool:
        return self.trust == "live"

    @property
    def says_offline(self) -> bool:
        return self.offline_at is not None


@dataclass(frozen=True)
class ItemReport:
    """One ``actual/nodes/<node>/<kind>/<id>`` report. ``healthy_since``: on the receiver's
    clock, since when it has been seen running and healthy on its current digest and start
    (``None``: not healthy now); a restart or a new digest starts the count again.
    ``running_since``: since when it has been running on its current digest (kept across its
    restarts: crash loops have their own verdict; ``None``: never seen running on it).
    ``state_since``: since when it has been reported in its current ``state`` on its current
    digest (what else the report says aside)."""

    node: str
    kind: str
    item_id: str
    doc: Mapping[str, Any] = field(default_factory=dict)
    received_at: float = 0.0
    healthy_since: float | None = None
    running_since: float | None = None
    state_since: float | None = None

    def text(self, key: str) -> str | None:
        value = self.doc.get(key)
        return value if isinstance(value, str) else None

    @property
    def restart_count(self) -> int | None:
        value = self.doc.get("restart_count")
        return value if isinstance(value, int) and not isinstance(value, bool) else None

    @property
    def started_at(self) -> str | float | None:
        value = self.doc.get("started_at")
        return value if isinstance(value, str | int | float) and not isinstance(value, bool) else None

    @property
    def is_healthy(self) -> bool:
        return self.doc.get("state") == "running" and self.doc.get("health") in (None, "healthy")


@dataclass(frozen=True)
class Change:
    """What a listener is told. ``what``: ``liveness`` (``verdict`` is the new one, ``before``
    the old state), ``status`` (``status`` the new doc, ``None``: cleared) or ``item``
    (``item`` the new report, ``None``: gone; ``kind``/``item_id`` name it)."""

    what: Literal["liveness", "status", "item"]
    node: str
    verdict: NodeVerdict | None = None
    before: str | None = None
    status: Mapping[str, Any] | None = None
    kind: str | None = None
    item_id: str | None = None
    item: ItemReport | None = None
    previous: ItemReport | None = None  # the item's report before this one


class Report(Protocol):
    """One MQTT message as the view takes it (:class:`phrame.mqtt.Message` fits)."""

    @property
    def topic(self) -> str: ...

    @property
    def payload(self) -> bytes: ...

    @property
    def retain(self) -> bool: ...
