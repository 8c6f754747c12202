"""The API's one MQTT connection: publishes writes, holds the writable kv subtrees, and
hands the agents' command replies to whoever waits for them.

Built by the app's lifespan with the desired plane's settings (agents read their commands
there, and answer a log command over the same connection). It connects in the background,
so the API serves reads while the broker is away (writes answer 503 then); it subscribes
once to the writable prefixes so that ``GET /api/kv`` of a value no mirror holds needs no
per-request subscription, and once to the reply topics, so a waiter registered before its
command is published cannot miss the answer.
"""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Callable

from phrame.mqtt import Message, MqttClient, MqttError, MqttSettings

log = logging.getLogger(__name__)


class BrokerUnavailable(MqttError):
    """Not connected, or the broker did not acknowledge in time."""


class Broker:
    def __init__(
        self, settings: MqttSettings, prefixes: tuple[str, ...], *, replies: str | None = None
    ) -> None:
        """``replies``: the filter of the agents' command replies (none: no command waits)."""
        # a fresh id per process (as config-sync's): two APIs on one anonymous broker must not
        # take each other's connection; with a user name, the user name is the id anyway
        self.client = MqttClient(settings, f"topic-api-{uuid.uuid4().hex[:8]}")
        self.prefixes = prefixes
        self.values: dict[str, bytes] = {}  # retained values under the writable prefixes
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self.refused: str | None = None  # the broker refused our login: no retry until restarted
        self.replies = replies
        self.replies_ready = False  # the broker acknowledged the subscription to the replies
        self._waiters: dict[str, Callable[[bytes], None]] = {}  # reply topic -> who waits

    def start(self) -> None:
        """Connect in a thread (waiting as long as it takes); return at once."""
        self._thread = threading.Thread(target=self._connect, name="topic-api-mqtt", daemon=True)
        self._thread.start()

    def _connect(self) -> None:
        try:
            self.client.start(timeout=None)
        except MqttError as e:
            log.error("topic API: %s; writes will answer 503", e)
            self.refused = str(e)
            return
        for prefix in self.prefixes:
            base = prefix.rstrip("/")
            self.client.subscribe(f"{base}/#", self._on_message)
        if self.replies is not None:
            # renewed on each reconnect by the client; a refusal (an old ACL) is logged there
            self.replies_ready = self.client.subscribe(self.replies, self._on_reply)

    def _on_reply(self, msg: Message) -> None:
        with self._lock:
            deliver = self._waiters.pop(msg.topic, None)
        if deliver is not None and msg.payload:
            deliver(msg.payload)

    def expect_reply(self, topic: str, deliver: Callable[[bytes], None]) -> Callable[[], None]:
        """Hand the first message on ``topic`` to ``deliver`` (on the MQTT thread); register
        before publishing the command. Returns the function that stops waiting."""
        if not (self.replies_ready and self.client.is_connected):
            raise BrokerUnavailable("not subscribed to the agents' replies (not connected, or refused)")
        with self._lock:
            self._waiters[topic] = deliver

        def forget() -> None:
            with self._lock:
                self._waiters.pop(topic, None)

        return forget

    def _on_message(self, msg: Message) -> None:
        with self._lock:
            if msg.payload:
                self.values[msg.topic] = msg.payload
            else:
                self.values.pop(msg.topic, None)

    def problem(self) -> str | None:
        """Why writes cannot be published now, or None when connected (for ``/readyz``)."""
        if self.refused is not None:
            return f"no broker connection: {self.refused}"
        if not self.client.is_connected:
            return f"not connected to the broker ({self.client.last_error}); reconnecting"
        return None

    def value(self, topic: str) -> bytes | None:
        with self._lock:
            return self.values.get(topic)

    def publish(self, topic: str, payload: bytes | None, *, retain: bool, timeout: float = 5.0) -> None:
        """Publish and wait for the broker's PUBACK (blocking: call from a worker thread)."""
        if not self.client.is_connected:
            raise BrokerUnavailable(f"not connected to the broker; cannot publish {topic}")
        try:
            # unacknowledged in time: the write answers 503 and is dropped, never sent later
            # (a message the broker refused by dropping us would come back on every reconnect)
            self.client.publish_batch([(topic, payload)], retain=retain, timeout=timeout, keep_unacked=False)
        except MqttError as e:
            raise BrokerUnavailable(str(e)) from e
        if retain:  # read-your-write, before the broker echoes it back
            self._on_message(Message(topic, payload or b"", True))

    def stop(self) -> None:
        self.client.stop()
