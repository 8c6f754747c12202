"""What the nodes report of their containers, for the rollout gate's health judgement.

Config-sync subscribes :meth:`ActualWatch.on_item` to every node's
``actual/nodes/+/containers/+`` (MQTT network thread: it only stores and never raises);
:meth:`ActualWatch.observed` gives the gate each replica's :class:`Observed`. ``healthy_since``
is config-sync's own (wall) clock when it first saw the replica running and healthy on its
current digest and start, never the node's: a retained report read after a restart starts
the count again (a rollout never jumps ahead). ``on_change`` is told which environment and
service changed, so the controller re-evaluates only rollouts that care.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from config_sync.rollouts.models import Observed
from phrame.mqtt import Message
from schemas import Topics, load_json


def _healthy(doc: dict[str, Any]) -> bool:
    return doc.get("state") == "running" and doc.get("health") in (None, "healthy")


class ActualWatch:
    def __init__(
        self,
        topics: Topics,
        *,
        clock: Callable[[], float] = time.time,
        on_change: Callable[[str, str], None] | None = None,
    ) -> None:
        self.topics, self.clock, self.on_change = topics, clock, on_change
        self._items: dict[tuple[str, str], Observed] = {}  # (node, item id) -> observed
        self._lock = threading.Lock()

    def filter(self) -> str:
        return self.topics.actual_containers_filter()

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
        return Observed(digest, state, health, restarts, since, started)

    def observed(self, node: str, item: str) -> Observed | None:
        with self._lock:
            return self._items.get((node, item))
