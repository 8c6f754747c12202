"""The actual plane as one thread-safe view: heartbeats, statuses, items, liveness by one rule.

A service builds one :class:`ActualView`, subscribes :meth:`ActualView.on_message` to the
actual-plane topics it needs (MQTT network thread: it stores, tells listeners, never
raises) and reads verdicts (:mod:`phrame.actual.judging`), statuses and items from any
thread. Every time is the receiver's clock (``clock``, injected); a heartbeat's own ``ts``
only dates a retained copy, aged on ``wall`` (unix time; ``None``: ``clock`` is unix time).
An invalid payload is logged and ignored: one bad report affects only its sender.
Listeners are called outside the lock and must only note or enqueue work.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from phrame.actual.beats import heartbeat_fields
from phrame.actual.facts import resumed, with_heartbeat, with_status
from phrame.actual.items import next_report, same_state
from phrame.actual.judging import is_settled, is_unconfirmed, judge, missed_after
from phrame.actual.records import Change, ItemReport, NodeFacts, Report
from phrame.actual.silence import NodeSilence
from phrame.settings.logs import ConditionLog
from schemas import PayloadError, Topic, Topics, check_payload, load_json
from schemas.node_health import NodeVerdict

log = logging.getLogger(__name__)
Listener = Callable[[Change], None]
MAX_TOPICS_SEEN = 100_000


class ActualView:
    def __init__(
        self,
        topics: Topics,
        *,
        timeout_s: float,
        clock: Callable[[], float] = time.time,
        wall: Callable[[], float] | None = None,
        started_at: float | None = None,
        log_invalid: bool = True,
    ) -> None:
        """``log_invalid`` False: the caller shows invalid payloads itself (``phrame status``)."""
        self.topics, self.timeout_s, self.clock, self.wall = topics, timeout_s, clock, wall
        self.log_invalid = log_invalid
        self.started_at = clock() if started_at is None else started_at  # listening since
        self._nodes: dict[str, NodeFacts] = {}
        self._items: dict[tuple[str, str, str], ItemReport] = {}  # (node, kind, id)
        self._states: dict[str, str] = {}  # node -> the state last told to listeners
        self._listeners: list[Listener] = []
        self._lock = threading.RLock()
        self._notes = ConditionLog(log)
        self.silence = NodeSilence(timeout_s)  # when each node was not reporting
        self._topics_seen: dict[str, Topic] = {}

    # -- feeding
    def listen(self, listener: Listener) -> None:
        """Tell ``listener`` of every change from now (on the feeding thread)."""
        with self._lock:
            self._listeners.append(listener)

    def on_message(self, msg: Report) -> None:
        """MQTT callback: one actual-plane message; anything else or invalid is ignored."""
        try:
            topic = self._parse(msg.topic)
            if topic.kind == "heartbeat" and msg.payload and topic.plane == "actual" and topic.node:
                # every node's, every few seconds: only the two fields read (phrame.actual.beats)
                ts, interval = heartbeat_fields(msg.payload)
                self._heard(topic.node, ts, interval, retained=msg.retain, received_at=None)
                return
            doc = load_json(msg.payload) if msg.payload else None
            if doc is not None:
                check_payload(topic.schema_name, doc)
        except (ValueError, PayloadError) as e:
            if self.log_invalid:
                self._notes.note(msg.topic, "ignoring an invalid report on %s: %s", msg.topic, e)
            return
        if topic.plane != "actual" or topic.node is None:
            return
        if topic.kind == "heartbeat":
            if doc is None:
                self.forget(topic.node)  # node removed: its retained heartbeat cleared
            else:
                self.heartbeat(topic.node, doc, retained=msg.retain)
        elif topic.kind == "status":
            self.status(topic.node, doc, retained=msg.retain)
        elif topic.item_id is not None:
            self.item(topic.node, topic.kind, topic.item_id, doc, retained=msg.retain)

    def _parse(self, name: str) -> Topic:
        # a fleet's topics repeat every beat: each is parsed once (bounded: a flood of new
        # names only starts the cache over)
        topic = self._topics_seen.get(name)
        if topic is None:
            topic = self.topics.parse(name)
            if len(self._topics_seen) >= MAX_TOPICS_SEEN:
                self._topics_seen.clear()
            self._topics_seen[name] = topic
        return topic

    def heartbeat(
        self, node: str, doc: Mapping[str, Any], *, retained: bool, received_at: float | None = None
    ) -> None:
        """A valid heartbeat. A live one counts from its arrival (immune to clock skew); a
        retained one from its own ``ts``, never later than its arrival, and not at all when
        dated past the timeout or ahead of its arrival (:data:`phrame.actual.Trust`)."""
        ts, interval = float(doc["ts"]), float(doc.get("interval_s") or 0) or None
        self._heard(node, ts, interval, retained=retained, received_at=received_at)

    def _heard(
        self, node: str, ts: float, interval: float | None, *, retained: bool, received_at: float | None
    ) -> None:
        now = self.clock() if received_at is None else received_at
        if not retained:
            self.silence.heard(node, now)
        wall_now = now if self.wall is None or received_at is not None else self.wall()
        with self._lock:
            facts = self._nodes.get(node) or NodeFacts(node)
            new = with_heartbeat(
                facts, ts, interval, received_at=now, dated_age_s=wall_now - ts, retained=retained,
                timeout_s=self.timeout_s,
            )  # fmt: skip
            if new is None:
                return
            self._nodes[node] = new
            # the usual case, a live beat of a node online: heard now, no will, so online still
            if not retained and new.offline_at is None and self._states.get(node) == "online":
                return
        self._tell_liveness([node])

    def status(
        self,
        node: str,
        doc: Mapping[str, Any] | None,
        *,
        retained: bool = False,
        received_at: float | None = None,
    ) -> None:
        """A node's status (``None``: cleared, which says nothing of its liveness); a retained
        copy of the one held is a replay, ignored (:func:`phrame.actual.facts.with_status`)."""
        now = self.clock() if received_at is None else received_at
        with self._lock:
            new = with_status(
                self._nodes.get(node) or NodeFacts(node), doc, received_at=now, retained=retained
            )
            if new is None:
                return
            self._nodes[node] = new
            listeners = list(self._listeners)
        self._tell(listeners, Change("status", node, status=doc))
        self._tell_liveness([node])

    def item(
        self, node: str, kind: str, item_id: str, doc: Mapping[str, Any] | None, *, retained: bool = False
    ) -> None:
        """One item report (``None``: the item is gone); a live one says its node reports."""
        key, now = (node, kind, item_id), self.clock()
        if not retained:
            self.silence.heard(node, now)
        with self._lock:
            before = self._items.get(key)
            after = None if doc is None else next_report(before, node, kind, item_id, doc, now)
            if after is None:
                self._items.pop(key, None)
            else:
                self._items[key] = after
            listeners = list(self._listeners)
        change = Change("item", node, kind=kind, item_id=item_id, item=after, previous=before)
        if not same_state(before, after):
            self._tell(listeners, change)

    def forget(self, node: str) -> None:
        with self._lock:
            self._nodes.pop(node, None)
        self._tell_liveness([node])

    def resume(self, now: float, *, listened_until: float | None = None) -> None:
        """We hear the actual plane again from ``now`` (a first connect or a reconnect): time
        not listening is never evidence that a node is down (:func:`phrame.actual.facts.resumed`;
        ``listened_until``: the last moment we know we were listening)."""
        with self._lock:
            self.started_at = max(self.started_at, now)
            for node, facts in list(self._nodes.items()):
                self._nodes[node] = resumed(
                    facts, now, listened_until=listened_until, timeout_s=self.timeout_s
                )
        self.check()

    # -- reading (any thread)
    def verdict(self, node: str, now: float | None = None) -> NodeVerdict:
        with self._lock:
            facts, started = self._nodes.get(node), self.started_at
        return judge(facts, self.clock() if now is None else now, self.timeout_s, started_at=started)

    def verdicts(self, nodes: Iterable[str], now: float | None = None) -> dict[str, NodeVerdict]:
        at = self.clock() if now is None else now
        return {n: self.verdict(n, at) for n in nodes}

    def offline(self, nodes: Iterable[str], now: float | None = None) -> dict[str, str]:
        """Node -> why it is offline, for those of ``nodes`` that are (unknown ones are not)."""
        return {n: v.reason for n, v in self.verdicts(nodes, now).items() if v.state == "offline"}

    def facts(self, node: str) -> NodeFacts | None:
        with self._lock:
            return self._nodes.get(node)

    def nodes(self) -> dict[str, NodeFacts]:
        """Every node heard of (a heartbeat or a status)."""
        with self._lock:
            return dict(self._nodes)

    def statuses(self) -> dict[str, Mapping[str, Any]]:
        with self._lock:
            return {n: f.status for n, f in self._nodes.items() if f.status is not None}

    def silent(self, node: str, since: float, now: float) -> float:
        """Seconds of ``[since, now]`` during which ``node`` sent no live report."""
        return self.silence.silent(node, since, now)

    def report(self, node: str, kind: str, item_id: str) -> ItemReport | None:
        with self._lock:
            return self._items.get((node, kind, item_id))

    def unconfirmed(self, now: float | None = None) -> dict[str, float]:
        """Nodes heard of only through a retained heartbeat their clock alone dates (behind
        by over a timeout, or ahead), while a live one may still come: node -> until when."""
        at = self.clock() if now is None else now
        with self._lock:
            return {
                n: f.received_at + missed_after(f.interval_s)
                for n, f in self._nodes.items()
                if f.received_at is not None and is_unconfirmed(f, at)
            }

    def unsettled(self, now: float | None = None) -> list[str]:
        """The nodes heard of whose verdict listening longer may still change (a reader that
        listens briefly, as ``phrame status``, waits for them)."""
        at = self.clock() if now is None else now
        with self._lock:
            nodes, started = dict(self._nodes), self.started_at
        return sorted(
            n for n, f in nodes.items() if not is_settled(f, at, self.timeout_s, started_at=started)
        )

    def due(self, now: float | None = None) -> float | None:
        """The next clock value at which a node's verdict may change by time alone (a timer
        calls :meth:`check` then); None: none will."""
        at = self.clock() if now is None else now
        with self._lock:
            nodes, grace_end = list(self._nodes.values()), self.started_at + self.timeout_s
        times = [grace_end]
        for f in nodes:
            if f.heard_at is not None:
                times.append(f.heard_at + self.timeout_s)
            if f.received_at is not None and is_unconfirmed(f, at):
                times.append(f.received_at + missed_after(f.interval_s))
        return min((t for t in times if t > at), default=None)

    # -- telling
    def check(self, now: float | None = None) -> list[Change]:
        """Tell listeners of every node whose liveness changed by time alone since the last
        call (a timer calls this); the changes told."""
        with self._lock:
            names = list(self._nodes) + [n for n in self._states if n not in self._nodes]
        return self._tell_liveness(names, now)

    def _tell_liveness(self, names: Iterable[str], now: float | None = None) -> list[Change]:
        at = self.clock() if now is None else now
        changes = []
        with self._lock:
            for node in names:
                verdict = self.verdict(node, at)
                before = self._states.get(node)
                if before != verdict.state:
                    self._states[node] = verdict.state
                    changes.append(Change("liveness", node, verdict=verdict, before=before))
            listeners = list(self._listeners)
        for change in changes:
            self._tell(listeners, change)
        return changes

    def _tell(self, listeners: list[Listener], change: Change) -> None:
        for listener in listeners:
            try:
                listener(change)
            except Exception:  # one listener's bug never stops the view or the others
                log.exception("a listener of the actual view failed on %s", change)
