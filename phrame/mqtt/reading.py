"""Collecting the retained messages of a subtree until the broker has gone quiet.

Used by :meth:`MqttClient.collect_retained`; the collector is fed on the network thread
and waited on by the caller. Pure apart from its clock; it never touches paho.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from phrame.mqtt.errors import MqttError
from phrame.mqtt.messages import Message


class RetainedCollector:
    """Gathers retained messages; :meth:`wait` returns once none arrived for ``settle`` s."""

    def __init__(
        self,
        topic_filter: str,
        *,
        settle: float,
        timeout: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.topic_filter = topic_filter
        self.settle = settle
        self._clock = clock
        self._deadline = clock() + timeout
        self._last = clock()
        self._seen: dict[str, bytes] = {}
        self._cond = threading.Condition()

    def remaining(self) -> float:
        return max(0.0, self._deadline - self._clock())

    def add(self, message: Message) -> None:
        """Record one message; an empty one clears. Only the broker's retained replay
        (retain flag set) extends the wait: live updates published meanwhile (delivered
        without the flag) still update the result but never keep it from settling, so a
        plane with steady heartbeats settles as fast as a quiet one."""
        with self._cond:
            if message.payload:
                self._seen[message.topic] = message.payload
            else:
                self._seen.pop(message.topic, None)
            if message.retain:
                self._last = self._clock()
                self._cond.notify_all()

    def result(self) -> dict[str, bytes]:
        with self._cond:
            return dict(sorted(self._seen.items()))

    def wait(self) -> dict[str, bytes]:
        """Block until quiet for ``settle`` seconds; :class:`MqttError` past the deadline."""
        with self._cond:
            self._last = self._clock()  # the quiet period starts at the SUBACK
            while True:
                quiet = self._clock() - self._last
                if quiet >= self.settle:
                    return dict(sorted(self._seen.items()))
                if self.remaining() <= 0:
                    raise MqttError(
                        f"retained messages under {self.topic_filter} kept arriving; "
                        f"no quiet {self.settle}s within the timeout"
                    )
                self._cond.wait(min(self.settle - quiet, self.remaining()))
