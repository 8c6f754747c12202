"""When config-sync last heard each node, for the deploy watcher's running description.

:class:`config_sync.deploys.watcher.DeployWatcher` feeds every node heartbeat and status in (MQTT
network thread) and asks :meth:`NodeWatch.offline` which of the nodes a deploy waits on are
offline by the shared rule (:func:`schemas.node_health.judge_node`). Liveness is judged on
the watcher's clock at receive time, never on the node's ``ts``: only a retained heartbeat
(sent before we subscribed) is dated back by its ``ts`` age on the wall clock, so a dead
node's last heartbeat does not read as fresh. Never decides a deploy's outcome (the
deploy timeout does); never raises from a callback.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from phrame.mqtt import Message
from schemas import Topics, load_json
from schemas.node_health import NodeVerdict, judge_node


@dataclass
class _Heard:
    heartbeat_at: float | None = None  # on the watcher's clock
    status: dict[str, Any] | None = None
    status_at: float | None = None


class NodeWatch:
    def __init__(
        self,
        topics: Topics,
        *,
        timeout_s: float,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
    ) -> None:
        self.topics, self.timeout_s, self.clock, self.wall = topics, timeout_s, clock, wall
        self._heard: dict[str, _Heard] = {}
        self._lock = threading.Lock()

    def heartbeat_filter(self) -> str:
        return self.topics.heartbeat_filter()

    def on_heartbeat(self, msg: Message) -> None:
        """MQTT callback: note when ``msg``'s node was heard; ignore what is not a heartbeat."""
        try:
            node = self.topics.parse(msg.topic).node
            doc = load_json(msg.payload) if msg.payload else None
        except ValueError:
            return
        if node is None or not isinstance(doc, dict):
            return
        now = self.clock()
        ts = doc.get("ts")
        if msg.retain and isinstance(ts, (int, float)) and not isinstance(ts, bool):
            now -= max(0.0, self.wall() - float(ts))  # sent before we listened: as old as it says
        with self._lock:
            heard = self._heard.setdefault(node, _Heard())
            if heard.heartbeat_at is None or now >= heard.heartbeat_at:
                heard.heartbeat_at = now

    def on_status(self, node: str, doc: dict[str, Any] | None) -> None:
        """A node's status (``None``: cleared), already parsed by the deploy watcher."""
        with self._lock:
            heard = self._heard.setdefault(node, _Heard())
            heard.status, heard.status_at = doc, self.clock()

    def verdict(self, node: str) -> NodeVerdict:
        with self._lock:
            heard = self._heard.get(node) or _Heard()
            status, heartbeat_at, status_at = heard.status, heard.heartbeat_at, heard.status_at
        return judge_node(status, heartbeat_at, self.clock(), self.timeout_s, status_at=status_at)

    def offline(self, nodes: Iterable[str]) -> dict[str, str]:
        """Node -> why it is offline, for those of ``nodes`` that are (unknown ones are not)."""
        verdicts = {n: self.verdict(n) for n in nodes}
        return {n: v.reason for n, v in verdicts.items() if v.state == "offline"}
