"""What a write may do: the kv rules (prefixes, topic, JSON, schema) and the commands
(restart, log tail).

Called by :mod:`topic_api.app` before anything is published. Pure: it raises
:class:`topic_api.errors.WriteRefused` with the HTTP status and a message naming the topic,
and returns the bytes to publish. It never publishes.
"""

from __future__ import annotations

import json
from typing import Any

from phrame.mqtt.messages import check_topic as check_mqtt_topic
from schemas import load_json
from schemas.registry import PayloadError, check_payload
from schemas.topics import Topics
from topic_api.errors import WriteRefused


def check_topic(topic: str) -> str:
    """``topic`` if it can name one retained value (no wildcard, not empty, not ``$...``)
    and the broker takes it (at most 200 levels and 65535 bytes: past them, mosquitto
    drops the connection)."""
    if not topic.strip("/"):
        raise WriteRefused(400, "topic is empty")
    if any(c in topic for c in "#+\x00"):
        raise WriteRefused(400, f"topic {topic!r} contains a wildcard or NUL: it must name one topic")
    if topic.startswith("$"):
        raise WriteRefused(400, f"topic {topic!r} is a broker topic ($...)")
    try:
        check_mqtt_topic(topic)
    except ValueError as e:
        raise WriteRefused(400, str(e)) from None
    return topic


def is_under(topic: str, prefixes: tuple[str, ...]) -> bool:
    """Whether ``topic`` lies under one of ``prefixes``, level by level (``a/b`` covers ``a/b/c``)."""
    for prefix in prefixes:
        base = prefix.rstrip("/")
        if topic == base or topic.startswith(base + "/"):
            return True
    return False


def schema_for(topic: str, prefix: str) -> str | None:
    """The schema of a topic of the layout (docs/architecture/topics.md), None for any other topic."""
    try:
        return Topics(prefix).parse(topic).schema_name
    except (ValueError, KeyError):
        return None


def kv_payload(topic: str, body: bytes, *, prefixes: tuple[str, ...], prefix: str) -> bytes:
    """The canonical bytes to publish retained at ``topic``, or :class:`WriteRefused`."""
    check_topic(topic)
    if not is_under(topic, prefixes):
        allowed = ", ".join(prefixes)
        raise WriteRefused(403, f"topic {topic!r} is outside the writable prefixes ({allowed})")
    try:
        value = load_json(body)  # strict: what it takes, JSON can carry back (no NaN, no \ud800)
    except ValueError as e:
        raise WriteRefused(400, f"payload for {topic!r} is not JSON: {e}") from None
    name = schema_for(topic, prefix)
    if name is not None:
        try:
            check_payload(name, value)
        except PayloadError as e:
            raise WriteRefused(422, f"payload for {topic!r} is invalid under schema {e}") from None
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode()


def kv_delete(topic: str, *, prefixes: tuple[str, ...]) -> None:
    """Refuse a delete outside ``prefixes``."""
    check_topic(topic)
    if not is_under(topic, prefixes):
        raise WriteRefused(403, f"topic {topic!r} is outside the writable prefixes ({', '.join(prefixes)})")


def restart_command(
    prefix: str, node: str, item_id: str, *, now: float, by: str, command_id: str
) -> tuple[str, bytes]:
    """(topic, payload) of a restart command, valid under ``cmd-restart``: the agent runs
    each ``command_id`` once, and only while ``now`` is recent (it is never retained)."""
    try:
        topic = Topics(prefix).restart(node, item_id)
    except ValueError as e:
        raise WriteRefused(400, f"cannot restart {item_id!r} on {node!r}: {e}") from None
    payload: dict[str, Any] = {"id": command_id, "requested_by": by, "ts": now}
    check_payload("cmd-restart", payload)
    return topic, json.dumps(payload, separators=(",", ":")).encode()


def logs_command(
    prefix: str, node: str, item_id: str, *, lines: int, now: float, by: str, command_id: str
) -> tuple[str, bytes]:
    """(topic, payload) of a log tail command, valid under ``cmd-logs`` (never retained);
    the agent answers on ``Topics.reply(node, command_id)``."""
    try:
        topic = Topics(prefix).logs(node, item_id)
    except ValueError as e:
        raise WriteRefused(400, f"cannot read the logs of {item_id!r} on {node!r}: {e}") from None
    payload: dict[str, Any] = {"id": command_id, "requested_by": by, "ts": now, "lines": lines}
    try:
        check_payload("cmd-logs", payload)
    except PayloadError as e:
        raise WriteRefused(400, f"lines={lines}: must be 1 to 200 ({e})") from None
    return topic, json.dumps(payload, separators=(",", ":")).encode()
