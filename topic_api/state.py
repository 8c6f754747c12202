"""What the API knows: the two planes' latest snapshots, their indexes and the node receipts.

:class:`topic_api.watcher.SnapshotWatcher` calls :meth:`ApiState.apply` with each newly read
snapshot document and :meth:`ApiState.apply_notices` with the mirrors' notices of single
changes in between (on the event loop, one writer); request handlers read the fields it
replaces whole (never mutated in place, so a handler never sees half an update). A notice
newer than the snapshot (its ``seq`` above the snapshot's ``messages``, same mirror run) is
laid over it until a snapshot holds it. Each node's heartbeat and status feed one
:class:`phrame.actual.ActualView` (the liveness rule placement and config-sync judge by),
on the times the caller passes: the first read of a plane as retained copies, every later
change as heard live. It never reads a file itself.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from phrame.actual import ActualView
from schemas import PayloadError, Topics, check_payload
from topic_api.history import HeartbeatHistory
from topic_api.planes import PlaneIndex, diff_topics, index_plane

PLANES = ("desired", "actual")
MAX_LISTED = 500  # topics named in one change event; more: truncated, refetch everything
MAX_PENDING = 50_000  # notices held over a snapshot; past it, changes wait for the next snapshot
GONE = object()  # a pending notice that cleared its topic


@dataclass(frozen=True)
class Notice:
    """One change a mirror told of: message ``seq`` of its run ``instance``."""

    seq: int
    topic: str
    payload: Any = None
    cleared: bool = False


@dataclass(frozen=True)
class PlaneView:
    generated_at: float | None = None
    topics: Mapping[str, Any] = field(default_factory=dict)
    index: PlaneIndex = field(default_factory=PlaneIndex)


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _is_valid(schema: str, doc: Mapping[str, Any]) -> bool:
    try:
        check_payload(schema, doc)
    except PayloadError:
        return False
    return True


def _stamp(value: Any) -> float | None:
    """A snapshot's ``generated_at`` as unix seconds: the mirror writes ISO 8601 text."""
    if isinstance(value, str):
        try:
            return datetime.fromisoformat(value).timestamp()
        except ValueError:
            return None
    return _number(value)


def _invalid(document: Mapping[str, Any]) -> dict[str, str]:
    """The snapshot's refused reports, topic -> why (the mirror's ``invalid``)."""
    raw = document.get("invalid")
    if not isinstance(raw, Mapping):
        return {}
    out = {}
    for topic, entry in raw.items():
        why = entry.get("error") if isinstance(entry, Mapping) else None
        out[str(topic)] = why if isinstance(why, str) else "refused by the mirror"
    return out


class ApiState:
    def __init__(
        self,
        prefix: str,
        *,
        history_s: float = 600.0,
        timeout_s: float = 20.0,
        clock: Callable[[], float] = time.time,
        started_at: float | None = None,
    ) -> None:
        """``timeout_s``: PHRAME_NODE_TIMEOUT_S; ``clock`` (unix time) and ``started_at``: the
        view's, for the liveness changes it works out by itself."""
        self.prefix = prefix
        self.planes: dict[str, PlaneView] = {p: PlaneView() for p in PLANES}
        self.history = HeartbeatHistory(keep_s=history_s)
        self.view = ActualView(Topics(prefix), timeout_s=timeout_s, clock=clock, started_at=started_at)
        self.loaded: set[str] = set()  # planes read at least once
        self.runs: dict[str, tuple[str | None, int]] = {}  # plane -> (instance, messages) of its snapshot
        self.pending: dict[str, dict[str, tuple[int, Any]]] = {p: {} for p in PLANES}  # topic -> (seq, value)
        # topic -> why the mirror refused it (the snapshot's, less what notices told since)
        self.invalid: dict[str, dict[str, str]] = {p: {} for p in PLANES}

    def generated_at(self) -> dict[str, float | None]:
        return {p: self.planes[p].generated_at for p in PLANES}

    def apply(self, plane: str, document: Mapping[str, Any], now: float) -> dict[str, Any] | None:
        """Take a new snapshot ``document``; the change event, or None when no topic changed."""
        raw = document.get("topics")
        topics: Mapping[str, Any] = raw if isinstance(raw, Mapping) else {}
        instance = document.get("instance") if isinstance(document.get("instance"), str) else None
        messages = document.get("messages")
        held = messages if isinstance(messages, int) and not isinstance(messages, bool) else 0
        if self.runs.get(plane, (None, 0))[0] != instance:
            self.pending[plane] = {}  # another run of the mirror: its notices say nothing of this one
        self.runs[plane] = (instance, held)
        pending = {t: sv for t, sv in self.pending[plane].items() if sv[0] > held}
        self.pending[plane] = pending
        if pending:  # told of since this snapshot was taken: still newer than it
            topics = dict(topics)
            for topic, (_, value) in pending.items():
                if value is GONE:
                    topics.pop(topic, None)
                else:
                    topics[topic] = value
        invalid = {t: why for t, why in _invalid(document).items() if t not in pending}
        self.invalid[plane] = invalid
        old = self.planes[plane]
        changed, removed = diff_topics(old.topics, topics)
        index = index_plane(topics, self.prefix, plane, invalid)
        first = plane not in self.loaded
        self.loaded.add(plane)
        if plane == "actual":
            self._note_receipts(old.index, index, now, first=first)
        self.planes[plane] = PlaneView(_stamp(document.get("generated_at")), topics, index)
        if not changed and not removed and old.generated_at == self.planes[plane].generated_at:
            return None
        listed = len(changed) + len(removed)
        truncated = listed > MAX_LISTED
        return {
            "plane": plane,
            "generated_at": self.planes[plane].generated_at,
            "changed": changed[:MAX_LISTED],
            "removed": removed[: max(0, MAX_LISTED - len(changed))],
            "truncated": truncated,
        }

    def apply_notices(
        self, plane: str, instance: str, notices: list[Notice], now: float
    ) -> dict[str, Any] | None:
        """Lay the mirror's newer notices over the plane; the change event, or None. Ignored
        before the plane's first snapshot or from another run of its mirror (its next
        snapshot brings them)."""
        run, held = self.runs.get(plane, (None, 0))
        pending = self.pending[plane]
        fresh = [n for n in notices if n.seq > held and (n.seq > pending.get(n.topic, (0, None))[0])]
        if plane not in self.loaded or run != instance or not fresh or len(pending) >= MAX_PENDING:
            return None
        old = self.planes[plane]
        topics = dict(old.topics)
        for n in sorted(fresh, key=lambda n: n.seq):
            pending[n.topic] = (n.seq, GONE if n.cleared else n.payload)
            if n.cleared:
                topics.pop(n.topic, None)
            else:
                topics[n.topic] = n.payload
        touched = {n.topic for n in fresh}
        was_invalid = touched & self.invalid[plane].keys()  # a good report (or a clear) after a refused one
        if was_invalid:
            self.invalid[plane] = {t: why for t, why in self.invalid[plane].items() if t not in touched}
        before = old.topics
        changed = sorted(t for t in touched if t in topics and (t not in before or before[t] != topics[t]))
        removed = sorted(t for t in touched if (t in before or t in was_invalid) and t not in topics)
        if not changed and not removed:
            return None
        index = index_plane(topics, self.prefix, plane, self.invalid[plane])
        if plane == "actual":
            self._note_receipts(old.index, index, now, first=False)
        self.planes[plane] = PlaneView(old.generated_at, topics, index)
        return {"plane": plane, "generated_at": old.generated_at, "changed": changed[:MAX_LISTED],
                "removed": removed[: max(0, MAX_LISTED - len(changed))],
                "truncated": len(changed) + len(removed) > MAX_LISTED}  # fmt: skip

    def _note_receipts(self, old: PlaneIndex, new: PlaneIndex, now: float, *, first: bool) -> None:
        """Each node's changed heartbeat and status into the actual view, received ``now``.

        The first read of the plane holds what was there before we looked: retained copies,
        a heartbeat dated by its own ``ts`` (as ``phrame status`` does). An invalid one is
        left out of the view (the node's row says why: :mod:`topic_api.nodes`)."""
        for name, node in new.nodes.items():
            before = old.nodes.get(name)
            hb = node.heartbeat if isinstance(node.heartbeat, Mapping) else None
            if hb is not None and (before is None or before.heartbeat != node.heartbeat):
                if _is_valid("actual-heartbeat", hb):
                    self.view.heartbeat(name, hb, retained=first, received_at=now)
                    self.history.record(name, hb, now)
            elif hb is None:
                self.view.forget(name)
            st = node.status if isinstance(node.status, Mapping) else None
            if st is not None and (before is None or before.status != node.status):
                if _is_valid("actual-status", st):
                    self.view.status(name, st, retained=first, received_at=now)
            elif st is None and before is not None and before.status is not None:
                self.view.status(name, None, received_at=now)  # cleared: says nothing of liveness
        for name in set(old.nodes) - set(new.nodes):
            self.view.forget(name)
        self.history.forget_missing(set(new.nodes))

    def node_names(self) -> list[str]:
        return sorted(set(self.planes["desired"].index.nodes) | set(self.planes["actual"].index.nodes))

    def all_topics(self) -> dict[str, Any]:
        return {**self.planes["desired"].topics, **self.planes["actual"].topics}
