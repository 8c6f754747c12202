"""Which callbacks want which topics: the client's memory of its subscriptions.

:class:`MqttClient` renews every remembered filter on each (re)connect and hands each
incoming message to the callbacks whose filter matches. A callback that raises is
logged and skipped, so one bad message never stops delivery to the others.

Each filter is split into its levels once, when it is added (:class:`FilterMatch`), and
each message's topic once per message: paho's ``topic_matches_sub`` builds a matcher tree
per call, which was a fifth of config-sync's and placement's CPU at 10,000 nodes (every
heartbeat tried against every filter). The permanent filters' answer for a topic is then
kept (:data:`MAX_ROUTES` topics at most, forgotten when a filter is added): a fleet's topics
come back every few seconds (heartbeats), and trying placement's filters on each was still
15 % of its network thread at 10,000 nodes.
"""

from __future__ import annotations

import logging
import threading

from phrame.mqtt.messages import Callback, Message
from phrame.mqtt.paho_setup import topic_matches_sub

log = logging.getLogger(__name__)
MAX_ROUTES = 250_000  # topics whose callbacks are kept; past it the memory starts again


def topic_matches(topic_filter: str, topic: str) -> bool:
    """Whether ``topic`` matches ``topic_filter`` (``+`` and ``#``), as the broker decides."""
    return bool(topic_matches_sub(topic_filter, topic))


class FilterMatch:
    """One topic filter, split into levels once; matches topics already split.

    The broker's rules: ``+`` is one level, a last ``#`` is the rest (none included:
    ``a/#`` matches ``a``), and a filter starting with a wildcard never matches a
    ``$`` topic (``$SYS/...``)."""

    __slots__ = ("levels", "rest", "wild_first")

    def __init__(self, topic_filter: str) -> None:
        levels = topic_filter.split("/")
        self.rest = levels[-1] == "#"
        self.levels = tuple(levels[:-1] if self.rest else levels)
        self.wild_first = topic_filter[:1] in ("+", "#")

    def matches(self, topic: str, parts: list[str]) -> bool:
        """``parts`` is ``topic.split("/")``, split once for every filter."""
        if self.wild_first and topic[:1] == "$":
            return False
        levels = self.levels
        n = len(levels)
        if len(parts) < n or (not self.rest and len(parts) != n):
            return False
        return all(want == got or want == "+" for want, got in zip(levels, parts, strict=False))


class Subscriptions:
    """Permanent subscriptions (kept across reconnects) and temporary ones (one read)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._permanent: dict[str, list[Callback]] = {}
        # QoS asked of the broker per permanent filter: 0 for reports where a lost one is as
        # good as a late one (heartbeats: the next comes within its interval), so neither the
        # broker nor this client handles an acknowledgement for each of thousands a second
        self._qos: dict[str, int] = {}
        self._temporary: dict[int, tuple[str, Callback]] = {}
        self._compiled: dict[str, FilterMatch] = {}  # by filter, kept while any uses it
        self._routes: dict[str, list[Callback]] = {}  # topic -> its permanent callbacks

    def _compile(self, topic_filter: str) -> None:
        if topic_filter not in self._compiled:
            self._compiled[topic_filter] = FilterMatch(topic_filter)

    def add(self, topic_filter: str, callback: Callback, qos: int = 1) -> None:
        """Remember ``callback`` for ``topic_filter``; a filter added twice keeps the higher QoS."""
        with self._lock:
            self._compile(topic_filter)
            self._permanent.setdefault(topic_filter, []).append(callback)
            self._qos[topic_filter] = max(qos, self._qos.get(topic_filter, 0))
            self._routes.clear()  # the new filter may match topics already routed

    def add_temporary(self, key: int, topic_filter: str, callback: Callback) -> None:
        with self._lock:
            self._compile(topic_filter)
            self._temporary[key] = (topic_filter, callback)

    def remove_temporary(self, key: int) -> bool:
        """Forget one temporary subscription; whether a permanent one has the same filter."""
        with self._lock:
            topic_filter, _ = self._temporary.pop(key)
            kept = topic_filter in self._permanent
            if not kept and all(f != topic_filter for f, _ in self._temporary.values()):
                del self._compiled[topic_filter]
            return kept

    def filters(self) -> list[str]:
        with self._lock:
            return list(self._permanent)

    def qos_of(self, topic_filter: str) -> int | None:
        """The QoS a permanent filter is subscribed with (``None``: no permanent one)."""
        with self._lock:
            return self._qos.get(topic_filter)

    def by_qos(self) -> dict[int, list[str]]:
        """The permanent filters grouped by their QoS (one SUBSCRIBE each on a reconnect)."""
        with self._lock:
            groups: dict[int, list[str]] = {}
            for topic_filter in self._permanent:
                groups.setdefault(self._qos[topic_filter], []).append(topic_filter)
            return groups

    def dispatch(self, message: Message) -> None:
        topic = message.topic
        with self._lock:
            compiled = self._compiled
            callbacks = self._routes.get(topic)
            parts: list[str] | None = None
            if callbacks is None:
                parts = topic.split("/")
                callbacks = [
                    cb
                    for f, cbs in self._permanent.items()
                    if compiled[f].matches(topic, parts)
                    for cb in cbs
                ]
                if len(self._routes) >= MAX_ROUTES:
                    self._routes.clear()
                self._routes[topic] = callbacks  # never changed in place: add() starts a new memory
            if self._temporary:  # reads come and go: matched each time
                parts = parts or topic.split("/")
                callbacks = callbacks + [
                    cb for f, cb in self._temporary.values() if compiled[f].matches(topic, parts)
                ]
        for callback in callbacks:
            try:
                callback(message)
            except Exception:
                log.exception("callback for %s failed; message dropped", message.topic)
