"""The small value types of the client API: an incoming :class:`Message`, a last :class:`Will`.

Imported by every service through ``phrame.mqtt``; plain frozen dataclasses, no paho.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class Message:
    """One received message. An empty ``payload`` on a retained topic means "cleared"."""

    topic: str
    payload: bytes
    retain: bool


@dataclass(frozen=True)
class Will:
    """The last will the broker publishes if the client vanishes without a DISCONNECT."""

    topic: str
    payload: bytes
    retain: bool = True
    qos: int = 1


Callback = Callable[[Message], None]


def check_filter(topic_filter: str) -> str:
    """``topic_filter`` if it is a valid MQTT subscription filter, else ``ValueError``."""
    if not topic_filter:
        raise ValueError("invalid topic filter '': empty; '#' is every topic")
    if "\x00" in topic_filter:
        raise ValueError(f"invalid topic filter {topic_filter!r}: it contains a NUL character")
    levels = topic_filter.split("/")
    for i, level in enumerate(levels):
        if "#" in level and (level != "#" or i != len(levels) - 1):
            raise ValueError(
                f"invalid topic filter {topic_filter!r}: '#' must be a whole level and the last one"
                f" (level {i + 1})"
            )
        if "+" in level and level != "+":
            raise ValueError(
                f"invalid topic filter {topic_filter!r}: '+' must be a whole level (level {i + 1})"
            )
    return topic_filter
