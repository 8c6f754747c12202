"""The mirror loop: one subscription to a plane, topic → payload in memory, debounced snapshots.

``phrame mirror`` builds one :class:`MirrorLoop` and calls :meth:`run` until SIGTERM. The MQTT
callback only updates the in-memory state (network thread); the writer thread decides with
:func:`mirror.debounce.wait_before_flush` and encodes (only the topics changed since the last
snapshot: :mod:`mirror.encoding`) and writes outside the lock. Each payload is read
with the strict reader (``schemas.load_json``: no NaN or Infinity, at most 64 levels deep):
an invalid one never stops the loop and never reaches ``topics`` (where it would break
every reader of the snapshot); it is listed under ``invalid`` with the reason.
Each message is also told to readers (the topic API) at once (:mod:`mirror.notices`: a
packet, not a snapshot). An agent's command reply (``<plane>/nodes/<node>/replies/<id>``,
never retained) is no state and is left out. It never publishes.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from mirror.debounce import wait_before_flush
from mirror.encoding import REMOVED, SnapshotEncoder
from mirror.notices import ChangeNotices
from mirror.settings import MirrorSettings
from mirror.snapshot import SnapshotWriter
from phrame.mqtt import Message, MqttClient, MqttError
from phrame.runtime import SIGNAL_CHECK_S
from phrame.settings import private_dir
from schemas import Topics, load_json

log = logging.getLogger(__name__)
RAW_LIMIT = 200  # characters of an invalid payload kept in the snapshot, for a person to see


class MirrorLoop:
    def __init__(
        self,
        settings: MirrorSettings,
        client: MqttClient | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.settings = settings
        self.client = client or MqttClient(settings.mqtt, f"phrame-mirror-{settings.plane}")
        self.writer = SnapshotWriter(settings.snapshot_path)
        self.instance = uuid.uuid4().hex[:12]  # in each snapshot: notices of another run are stale
        self.notices = ChangeNotices(settings.directory, settings.plane, self.instance)
        self._clock = clock
        self._topics_layout = Topics(settings.topic_prefix)
        self._nodes_head = f"{settings.topic_prefix}/actual/nodes/"
        self._cond = threading.Condition()
        self._topics: dict[str, Any] = {}
        self._changed: dict[str, Any] = {}  # topic → value (REMOVED: gone) since the last snapshot
        self._encoder = SnapshotEncoder()  # the writer thread's
        self._invalid: dict[str, dict[str, str]] = {}
        self._last_change: float | None = None
        self._first_unflushed: float | None = None
        self._first_beat_unflushed: float | None = None  # a heartbeat not in a snapshot yet
        self._not_before = 0.0
        self._stopping = False
        self._connecting = False
        self.messages = 0  # messages applied so far
        self.last_message_at: float | None = None
        self.written: list[tuple[float, int]] = []  # (clock at write, messages it holds): for benchmarks

    # -- MQTT side (network thread)
    def on_message(self, message: Message) -> None:
        topic = message.topic
        if self._topics_layout.is_reply(topic):  # an answer for whoever asked: no state to hold
            return
        valid = True
        with self._cond:
            self._topics.pop(topic, None)
            self._invalid.pop(topic, None)
            if message.payload:  # empty: a retained clear removes the topic
                try:
                    self._topics[topic] = load_json(message.payload)  # strict: see the docstring
                except ValueError as e:
                    raw = message.payload[:RAW_LIMIT].decode("utf-8", "replace")
                    self._invalid[topic] = {"error": f"not JSON: {e}", "raw": raw}
                    valid = False
            now = self._clock()
            self.messages += 1
            seq, payload = self.messages, self._topics.get(topic, REMOVED)
            self._changed[topic] = payload
            self.last_message_at = now
            # The writer is woken only when a write becomes due sooner than it waits for: the
            # first unwritten change or heartbeat. A later change only moves the quiet time
            # on, which the writer reads when it wakes (not 2,000 wake-ups a second).
            if valid and message.payload and self._is_heartbeat(topic):
                # never quiet, never a change worth a write of its own: see mirror.debounce
                if self._first_beat_unflushed is None:
                    self._first_beat_unflushed = now
                    self._cond.notify_all()
            else:
                self._last_change = now
                if self._first_unflushed is None:
                    self._first_unflushed = now
                    self._cond.notify_all()
        if valid:  # one network thread: notices go out in message order; an invalid one waits for the file
            self.notices.changed(
                seq, topic, None if payload is REMOVED else payload, cleared=not message.payload
            )

    def _is_heartbeat(self, topic: str) -> bool:
        """A node's heartbeat (``<prefix>/actual/nodes/<node>/heartbeat``)."""
        # string tests, not the layout's parser: this runs for every heartbeat of the fleet
        head = self._nodes_head
        return (
            topic.startswith(head)
            and topic.endswith("/heartbeat")
            and topic.count("/", len(head)) == 1
            and len(topic) > len(head) + len("/heartbeat")
        )

    def topics_held(self) -> dict[str, Any]:
        """The topics held now (a reference, read without the lock: for metrics only)."""
        return self._topics

    # -- lifecycle
    def start(self) -> None:
        """Make the folder, connect (waiting as long as it takes) and subscribe once."""
        folder = self.settings.directory
        if self.settings.directory_is_default:
            private_dir(folder)
        else:
            folder.mkdir(parents=True, exist_ok=True)
        self.notices.open()
        with self._cond:
            self._connecting = True
        try:
            self.client.start(timeout=None)
        finally:
            with self._cond:
                self._connecting = False
        self.client.subscribe(self.settings.topic_filter, self.on_message)

    def stop(self) -> None:
        """Safe from a signal handler: ends the wait for a broker, or :meth:`serve` after a last flush."""
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
            connecting = self._connecting
        if connecting:
            # Off this thread: a signal handler may have interrupted the client's own lock.
            threading.Thread(target=self.client.stop, name="mirror-stop", daemon=True).start()

    def run(self) -> int:
        try:
            try:
                self.start()
            except MqttError:
                if self._stopping:  # stopped before the broker answered: a clean exit
                    return 0
                raise
            try:
                self.serve()
            finally:
                self.client.stop()
        finally:
            self.notices.close()
        return 0

    def serve(self) -> None:
        """Write snapshots as the debounce decides until :meth:`stop`; a last flush at the end
        (then no more notices: the socket goes)."""
        try:
            self._serve()
        finally:
            self.notices.close()

    def _serve(self) -> None:
        while True:
            with self._cond:
                while not self._stopping:
                    wait = self._decide()
                    if wait == 0.0:
                        break
                    # never blocked for long: SIGTERM's handler runs on this (the main) thread
                    self._cond.wait(SIGNAL_CHECK_S if wait is None else min(wait, SIGNAL_CHECK_S))
                if self._stopping and self._first_unflushed is None and self._first_beat_unflushed is None:
                    return
                head, changes, held = self._take()
            ok = self.writer.write(self._encoder.encode(head, changes))
            if ok:
                self.notices.written(held)
            with self._cond:
                if ok:
                    self.written.append((self._clock(), held))
                else:  # keep it due; retry after one debounce window
                    self._first_unflushed = self._first_unflushed or self._clock()
                    self._not_before = self._clock() + self.settings.debounce_s
                if self._stopping:
                    return

    def _decide(self) -> float | None:
        return wait_before_flush(
            self._clock(),
            self._last_change,
            self._first_unflushed,
            debounce_s=self.settings.debounce_s,
            max_delay_s=self.settings.max_delay_s,
            not_before=self._not_before,
            first_beat_unflushed=self._first_beat_unflushed,
            beat_delay_s=self.settings.heartbeat_delay_s,
        )

    def _take(self) -> tuple[dict[str, Any], dict[str, Any], int]:
        """The snapshot of the current state: its head (every key but ``topics``), the topics
        changed since the last one, and the messages it holds; marks it flushed (caller holds
        the lock). The writer thread encodes it (:class:`mirror.encoding.SnapshotEncoder`)."""
        self._first_unflushed = self._first_beat_unflushed = None
        changes, self._changed = self._changed, {}
        head = {
            "plane": self.settings.plane,
            "prefix": self.settings.topic_prefix,
            "generated_at": datetime.now(UTC).isoformat(timespec="milliseconds"),
            "messages": self.messages,
            "instance": self.instance,
            "invalid": dict(self._invalid),
        }
        return head, changes, self.messages
