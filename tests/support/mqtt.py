"""Test helpers for MQTT: an inbox that records what a subscription delivered, with
bounded waits, and the list of started clients that the ``clients`` fixture stops."""

from __future__ import annotations

import threading

from phrame.mqtt import Message


class Inbox:
    """A subscription callback recording every message; waits are bounded."""

    def __init__(self) -> None:
        self.messages: list[Message] = []
        self.cond = threading.Condition()

    def __call__(self, message: Message) -> None:
        with self.cond:
            self.messages.append(message)
            self.cond.notify_all()

    @property
    def topics(self) -> set[str]:
        return {m.topic for m in self.messages}

    @property
    def payloads(self) -> list[bytes]:
        return [m.payload for m in self.messages]

    def wait_for(self, topic: str | None = None, timeout: float = 5.0, payload: bytes | None = None) -> bool:
        """True once a message matching ``topic`` and/or ``payload`` arrived within ``timeout``."""

        def seen() -> bool:
            return any(
                (topic is None or m.topic == topic) and (payload is None or m.payload == payload)
                for m in self.messages
            )

        with self.cond:
            return self.cond.wait_for(seen, timeout)
