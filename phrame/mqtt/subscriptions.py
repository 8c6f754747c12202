"""Which callbacks want which topics: the client's memory of its subscriptions.

:class:`MqttClient` renews every remembered filter on each (re)connect and hands each
incoming message to the callbacks whose filter matches. A callback that raises is
logged and skipped, so one bad message never stops delivery to the others.
"""

from __future__ import annotations

import logging
import threading

from phrame.mqtt.messages import Callback, Message
from phrame.mqtt.paho_setup import topic_matches_sub

log = logging.getLogger(__name__)


def topic_matches(topic_filter: str, topic: str) -> bool:
    """Whether ``topic`` matches ``topic_filter`` (``+`` and ``#``), as the broker decides."""
    return bool(topic_matches_sub(topic_filter, topic))


class Subscriptions:
    """Permanent subscriptions (kept across reconnects) and temporary ones (one read)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._permanent: dict[str, list[Callback]] = {}
        self._temporary: dict[int, tuple[str, Callback]] = {}

    def add(self, topic_filter: str, callback: Callback) -> None:
        with self._lock:
            self._permanent.setdefault(topic_filter, []).append(callback)

    def add_temporary(self, key: int, topic_filter: str, callback: Callback) -> None:
        with self._lock:
            self._temporary[key] = (topic_filter, callback)

    def remove_temporary(self, key: int) -> bool:
        """Forget one temporary subscription; whether a permanent one has the same filter."""
        with self._lock:
            topic_filter, _ = self._temporary.pop(key)
            return topic_filter in self._permanent

    def filters(self) -> list[str]:
        with self._lock:
            return list(self._permanent)

    def dispatch(self, message: Message) -> None:
        with self._lock:
            callbacks = [
                cb for f, cbs in self._permanent.items() if topic_matches_sub(f, message.topic) for cb in cbs
            ]
            callbacks += [cb for f, cb in self._temporary.values() if topic_matches_sub(f, message.topic)]
        for callback in callbacks:
            try:
                callback(message)
            except Exception:
                log.exception("callback for %s failed; message dropped", message.topic)
