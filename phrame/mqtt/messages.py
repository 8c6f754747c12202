"""The small value types of the client API: an incoming :class:`Message`, a last :class:`Will`.

Imported by every service through ``phrame.mqtt``; plain frozen dataclasses, no paho.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class Message:
    """One received message. An empty ``payload`` on a retained topic means "cleared"."""

    topic: str
    payload: bytes
    retain: bool
    qos: int = 1  # as delivered: the lower of the publication's and the subscription's


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


# mosquitto closes the connection of a client that publishes to a topic of more levels
# (its hierarchy limit); MQTT itself caps a topic name at 65535 bytes of UTF-8.
MAX_TOPIC_LEVELS = 200
MAX_TOPIC_BYTES = 65535


def _is_refused_char(code: int) -> bool:
    """C0 and C1 controls and Unicode noncharacters: mosquitto takes them for a malformed
    packet (the surrogates are refused by the UTF-8 check)."""
    return code < 0x20 or 0x7F <= code < 0xA0 or 0xFDD0 <= code <= 0xFDEF or code & 0xFFFE == 0xFFFE


# the same characters as one class: a topic is searched once in C, not char by char
_REFUSED = re.compile(
    "[\x00-\x1f\x7f-\x9f\ufdd0-\ufdef"
    + "".join(chr(plane << 16 | 0xFFFE) + chr(plane << 16 | 0xFFFF) for plane in range(17))
    + "]"
)


def check_topic(topic: str) -> str:
    """``topic`` if a broker takes a message to it, else ``ValueError`` saying why.

    A message the broker refuses this way costs the connection, so it is checked before
    it is queued."""
    if not topic:
        raise ValueError("invalid topic '': empty")
    if "+" in topic or "#" in topic:
        raise ValueError(f"invalid topic {topic[:200]!r}: it holds a wildcard (+ or #)")
    if "\x00" in topic:
        raise ValueError(f"invalid topic {topic[:200]!r}: it contains a NUL character")
    found = _REFUSED.search(topic)
    if found is not None:
        odd = found.group()
        raise ValueError(
            f"invalid topic {topic[:200]!r}: it contains U+{ord(odd):04X}, a control character or"
            " Unicode noncharacter (the broker drops a client that publishes there)"
        )
    try:
        size = len(topic.encode("utf-8"))
    except UnicodeEncodeError:
        raise ValueError(f"invalid topic {topic[:200]!r}: not valid Unicode (a lone surrogate)") from None
    if size > MAX_TOPIC_BYTES:
        raise ValueError(
            f"invalid topic {topic[:60]!r}...: {size} bytes, more than MQTT's {MAX_TOPIC_BYTES} bytes"
        )
    levels = topic.count("/") + 1
    if levels > MAX_TOPIC_LEVELS:
        raise ValueError(
            f"invalid topic {topic[:60]!r}...: {levels} levels, more than {MAX_TOPIC_LEVELS} levels"
            " (the broker drops a client that publishes there)"
        )
    return topic
