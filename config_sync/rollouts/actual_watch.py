"""What the nodes report of their containers, and when they report, for the rollout gate.

Config-sync subscribes :meth:`ActualWatch.on_item` to every node's
``actual/nodes/+/containers/+`` and :meth:`ActualWatch.on_heartbeat` to the heartbeats (MQTT
network thread: they only store and never raise); :meth:`ActualWatch.observed` gives the gate
each replica's :class:`Observed` and :meth:`ActualWatch.silent` how long a node was not
reporting (:class:`NodeSilence`). ``healthy_since`` and ``running_since`` are config-sync's own
(wall) clock when it first saw the replica healthy (on its current digest and start), and
running (on its current digest), never the node's: a retained report read after a restart
starts the count again (a rollout never jumps ahead). ``on_change`` is told which environment
and service changed, so the controller re-evaluates only rollouts that care.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from typing import Any

from config_sync.rollouts.models import Observed
from phrame.mqtt import Message
from schemas import Topics, load_json

MAX_GAPS = 128  # silences kept per node: far more than any deadline spans


def _healthy(doc: dict[str, Any]) -> bool:
    return doc.get("state") == "running" and doc.get("health") in (None, "healthy")


class NodeSilence:
    """When each node was not reporting. A node reports for ``grace_s`` after each live message
    (config-sync's node timeout, the rule that calls a node offline) and is silent before its
    first one since config-sync started; a retained message is no news and never counts."""

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


class ActualWatch:
    def __init__(
        self,
        topics: Topics,
        *,
        clock: Callable[[], float] = time.time,
        on_change: Callable[[str, str], None] | None = None,
        node_timeout_s: float = 20.0,
    ) -> None:
        self.topics, self.clock, self.on_change = topics, clock, on_change
        self.nodes = NodeSilence(node_timeout_s)
        self._items: dict[tuple[str, str], Observed] = {}  # (node, item id) -> observed
        self._lock = threading.Lock()

    def filter(self) -> str:
        return self.topics.actual_containers_filter()

    def heartbeat_filter(self) -> str:
        return self.topics.heartbeat_filter()

    def on_heartbeat(self, msg: Message) -> None:
        """MQTT callback: a live heartbeat says its node reports (a retained one says nothing)."""
        try:
            node = self.topics.parse(msg.topic).node
        except ValueError:
            return
        if node is not None and msg.payload and not msg.retain:
            self.nodes.heard(node, self.clock())

    def silent(self, node: str, since: float, now: float) -> float:
        """Seconds of ``[since, now]`` during which ``node`` was not reporting."""
        return self.nodes.silent(node, since, now)

    def on_item(self, msg: Message) -> None:
        """MQTT callback: store one container report (an empty payload: it is gone)."""
        try:
            parsed = self.topics.parse(msg.topic)
            doc = load_json(msg.payload) if msg.payload else None
        except ValueError:
            return
        if parsed.node is None or parsed.item_id is None or not (doc is None or isinstance(doc, dict)):
            return
        key = (parsed.node, parsed.item_id)
        if not msg.retain:
            self.nodes.heard(parsed.node, self.clock())
        with self._lock:
            before = self._items.get(key)
            if doc is None:
                self._items.pop(key, None)
            else:
                self._items[key] = self._observe(before, doc)
            changed = self._items.get(key) != before
        if changed and self.on_change is not None and parsed.environment and parsed.service:
            self.on_change(parsed.environment, parsed.service)

    def _observe(self, before: Observed | None, doc: dict[str, Any]) -> Observed:
        digest = doc.get("digest") if isinstance(doc.get("digest"), str) else None
        restarts = doc.get("restart_count")
        restarts = restarts if isinstance(restarts, int) and not isinstance(restarts, bool) else None
        started = doc.get("started_at")
        started = (
            started if isinstance(started, (str, int, float)) and not isinstance(started, bool) else None
        )
        since = None
        if _healthy(doc):
            # the same container, healthy since we last looked: the count goes on; a new
            # digest or a restart (another started_at) starts it again
            same = before is not None and (before.digest, before.started_at) == (digest, started)
            since = before.healthy_since if same and before is not None else None
            since = since if since is not None else self.clock()
        state = doc.get("state") if isinstance(doc.get("state"), str) else None
        health = doc.get("health") if isinstance(doc.get("health"), str) else None
        # the replica's start on this digest: kept across its restarts (crash loops have
        # their own verdict), so a restarting replica does not push its deadline back
        running = before.running_since if before is not None and before.digest == digest else None
        if running is None and state == "running":
            running = self.clock()
        return Observed(digest, state, health, restarts, since, started, running)

    def observed(self, node: str, item: str) -> Observed | None:
        with self._lock:
            return self._items.get((node, item))
