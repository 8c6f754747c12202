"""What wakes placement: nodes' heartbeats and statuses, and config-sync's sync states.

:class:`~placement.loop.PlacementLoop` subscribes :meth:`Triggers.on_actual` to the actual
plane's heartbeats and statuses and :meth:`Triggers.on_sync` to every environment's ``sync``
(MQTT network thread: quick, never raises). They feed the actual view and only add keys to the
loop's work queue: :data:`EVERY` (all environments) when a message changes whether a node
is alive, one environment when config-sync reports a new commit of it. Never decides.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from phrame.actual import Change, liveness_filters
from phrame.mqtt import Message
from placement.health import PlacementHealth
from schemas import PayloadError, Topics, check_payload, load_json

log = logging.getLogger(__name__)
EVERY = ""  # the key of a pass over every environment (environment names are never empty)


class Triggers:
    def __init__(
        self,
        liveness: PlacementHealth,
        topics: Topics,
        *,
        clock: Callable[[], float],
        enqueue: Callable[[str], object],
    ) -> None:
        self.liveness, self.topics, self.clock, self.enqueue = liveness, topics, clock, enqueue
        self.last_retained = 0.0  # monotonic time of the last retained message seen
        self._commits: dict[str, str] = {}  # environment -> the commit its last sync state named
        self._lock = threading.Lock()
        liveness.view.listen(self._on_change)

    def actual_filters(self) -> list[tuple[str, int]]:
        """The actual plane's filters placement reads, each with the QoS to subscribe with."""
        return liveness_filters(self.topics)

    def sync_filter(self) -> str:
        return f"{self.topics.prefix}/desired/environments/+/sync"

    def commit_of(self, env: str) -> str | None:
        """The commit the last sync state of ``env`` named (None: none seen)."""
        with self._lock:
            return self._commits.get(env)

    def on_actual(self, msg: Message) -> None:
        """A heartbeat or status: into the actual view, which validates it (an invalid report
        is logged and ignored) and tells :meth:`_on_change` when a node's liveness changed."""
        if msg.retain:
            self.last_retained = time.monotonic()
        self.liveness.view.on_message(msg)

    def _on_change(self, change: Change) -> None:
        # the view judges liveness once per message already: a pass of everything only when
        # that judgement changed (the usual heartbeat changes nothing and costs no pass)
        if change.what == "liveness":
            self.enqueue(EVERY)

    def on_sync(self, msg: Message) -> None:
        """An environment's sync state: a pass of that environment when its commit is new
        (a retained one, read on connect, only tells where things stand: the first pass
        reads every environment anyway)."""
        try:
            topic = self.topics.parse(msg.topic)
            if topic.kind != "sync" or topic.environment is None or not msg.payload:
                return
            doc = load_json(msg.payload)
            check_payload(topic.schema_name, doc)
        except (ValueError, PayloadError) as e:
            log.warning("ignoring invalid message on %s: %s", msg.topic, e)
            return
        env, commit = topic.environment, doc.get("commit")
        if not isinstance(commit, str):
            return
        with self._lock:
            if self._commits.get(env) == commit:
                return
            self._commits[env] = commit
        if not msg.retain:
            self.enqueue(env)
