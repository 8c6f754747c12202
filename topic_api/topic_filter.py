"""MQTT topic filters for ``/api/topics?filter=``: checked and matched exactly as a broker does.

Called by :mod:`topic_api.app`. Pure. ``+`` matches one level, ``#`` (last level only) any
number including none, so ``a/#`` matches ``a`` itself; a filter starting with a wildcard
does not match topics starting with ``$`` (MQTT 3.1.1 §4.7.2).
"""

from __future__ import annotations

from collections.abc import Iterable

from phrame.mqtt.messages import check_filter as mqtt_filter

MAX_FILTER_CHARS = 1024


class FilterError(ValueError):
    """An invalid MQTT topic filter; the message says which level is wrong."""


def check_filter(text: str) -> list[str]:
    """The filter's levels, or :class:`FilterError` saying what is wrong (the syntax is the
    MQTT client's own rule, :func:`phrame.mqtt.check_filter`; the length cap is the API's)."""
    if len(text) > MAX_FILTER_CHARS:
        raise FilterError(f"filter is {len(text)} characters long, over {MAX_FILTER_CHARS}")
    try:
        return mqtt_filter(text).split("/")
    except ValueError as e:
        raise FilterError(str(e)) from None


def matches(levels: list[str], topic: str) -> bool:
    """Whether ``topic`` matches the checked filter ``levels``."""
    parts = topic.split("/")
    if topic.startswith("$") and levels[0] in ("+", "#"):
        return False
    for i, level in enumerate(levels):
        if level == "#":
            return True  # also when the topic ended one level above: 'a/#' matches 'a'
        if i >= len(parts):
            return False
        if level != "+" and level != parts[i]:
            return False
    return len(parts) == len(levels)


def select(text: str, topics: Iterable[str]) -> list[str]:
    """The topics matching filter ``text``, sorted (:class:`FilterError` for a bad filter)."""
    levels = check_filter(text)
    return sorted(t for t in topics if matches(levels, t))
