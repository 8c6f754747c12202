"""The live heartbeats ``phrame status`` hears after reading the retained topics.

:func:`phrame.cli.cmd_status.run` subscribes :meth:`LiveHeartbeats.on_message` to every node's
heartbeat before it reads the retained topics, then :meth:`LiveHeartbeats.wait` listens
until :func:`phrame.cli.status_liveness.undecided` is empty or the ``--timeout`` ends. Only
messages the broker forwards live count (a retained copy says nothing of *now*); each is
stamped with this host's clock when it arrives. Never publishes; never raises from the
MQTT callback (an invalid heartbeat is skipped, as every reader does).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping

from phrame.cli.status_liveness import Listen, LiveBeat, Retained, undecided
from phrame.mqtt import Message
from schemas import PayloadError, Topics, check_payload, load_json

POLL_S = 0.05


class LiveHeartbeats:
    def __init__(self, topics: Topics, clock: Callable[[], float] = time.time) -> None:
        self.topics, self.clock = topics, clock
        self.started_at = clock()
        self._beats: dict[str, LiveBeat] = {}
        self._lock = threading.Lock()

    def begin(self) -> None:
        """Listening starts now (the subscription is acknowledged)."""
        self.started_at = self.clock()

    def on_message(self, msg: Message) -> None:
        """MQTT network thread: note a live heartbeat; ignore retained copies and bad payloads."""
        if msg.retain or not msg.payload:
            return
        received_at = self.clock()
        try:
            node = self.topics.parse(msg.topic).node
            doc = load_json(msg.payload)
            check_payload("actual-heartbeat", doc)
        except (ValueError, PayloadError):
            return
        if node is None:
            return
        with self._lock:
            self._beats[node] = LiveBeat(received_at, float(doc["ts"]), float(doc["interval_s"]))

    def listen(self) -> Listen:
        """What was heard from :meth:`begin` until now."""
        with self._lock:
            return Listen(self.started_at, self.clock(), dict(self._beats))

    def wait(self, nodes: Mapping[str, Retained], *, timeout_s: float, deadline: float) -> Listen:
        """Listen until every node in ``nodes`` is decided (see :func:`undecided`) or the
        clock reaches ``deadline``; what was heard."""
        while True:
            heard = self.listen()
            if not undecided(nodes, heard, heard.ended_at, timeout_s) or heard.ended_at >= deadline:
                return heard
            time.sleep(POLL_S)
