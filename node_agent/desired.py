"""The desired state of this node, assembled from desired-plane messages.

The loop feeds every MQTT message here (from the network thread) and takes a
:class:`DesiredState` snapshot per pass. Every payload is size-checked, parsed and
validated with ``schemas`` first; an invalid one is recorded as an error for the node
status and ignored (the last valid payload of that topic stays in effect). The
``prefetch/<env>`` topics (images to pull ahead of a rollout's wave) are kept apart: they
are no part of the desired state (:meth:`DesiredStore.prefetch`).
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any

from node_agent.errors import printable
from node_agent.models import DesiredState, Manifest
from schemas import PayloadError, Topics, check_payload, load_json

ITEM_KINDS = ("containers", "networks", "processes")


class DesiredStore:
    """Thread-safe map of this node's desired topics to their validated payloads."""

    def __init__(self, topics: Topics, node: str, *, max_payload_bytes: int = 1 << 20) -> None:
        self.topics = topics
        self.node = node
        self.max_payload_bytes = max_payload_bytes
        self._lock = threading.Lock()
        self._items: dict[str, dict[str, dict[str, Any]]] = {k: {} for k in ITEM_KINDS}
        self._manifest: Manifest | None = None
        self._prefetch: dict[str, tuple[str, ...]] = {}  # env -> images to pull ahead
        self._errors: dict[str, str] = {}  # topic -> why its payload was ignored

    def apply(self, topic: str, payload: bytes | None) -> bool:
        """Record one message; return True when the desired state changed."""
        try:
            change = self._parse(topic, payload)
        except ValueError as e:  # PayloadError, JSON and topic errors are ValueErrors
            with self._lock:
                self._errors[topic] = printable(str(e))  # it may quote a huge value or a lone surrogate
            return False
        kind, key, doc = change
        with self._lock:
            self._errors.pop(topic, None)
            if kind == "prefetch":
                asked = self._prefetch.get(key)
                if doc is None:
                    self._prefetch.pop(key, None)
                else:
                    self._prefetch[key] = tuple(str(i) for i in doc["images"])
                return bool(asked != self._prefetch.get(key))
            if kind == "manifest":
                before: Any = self._manifest
                self._manifest = None if doc is None else _manifest(doc)
                return bool(before != self._manifest)
            items = self._items[kind]
            if doc is None:
                return items.pop(key, None) is not None
            before = items.get(key)
            items[key] = doc
            return bool(before != doc)

    def apply_all(self, messages: Mapping[str, bytes]) -> None:
        for topic, payload in sorted(messages.items()):
            self.apply(topic, payload)

    def _parse(self, topic: str, payload: bytes | None) -> tuple[str, str, dict[str, Any] | None]:
        parsed = self.topics.parse(topic)
        if parsed.plane != "desired" or parsed.node != self.node:
            raise ValueError(f"topic {topic} is not for node {self.node}; ignored")
        if parsed.kind not in (*ITEM_KINDS, "manifest", "prefetch"):
            raise ValueError(f"topic {topic} is not a node item or manifest; ignored")
        key = parsed.item_id or (parsed.environment if parsed.kind == "prefetch" else None) or ""
        if not payload:
            return parsed.kind, key, None
        if len(payload) > self.max_payload_bytes:
            raise ValueError(f"{topic}: payload of {len(payload)} bytes exceeds {self.max_payload_bytes}")
        try:
            doc = load_json(payload)
        except ValueError as e:
            raise ValueError(f"{topic}: invalid JSON: {e}") from None
        try:
            check_payload(parsed.schema_name, doc)
        except PayloadError as e:
            raise ValueError(f"{topic}: {e}") from None
        if parsed.item_id and doc.get("name") != parsed.item_id:
            raise ValueError(f"{topic}: payload name {doc.get('name')!r} does not match")
        return parsed.kind, key, doc

    def snapshot(self) -> DesiredState:
        """The desired state: with a manifest, only the received items it lists."""
        with self._lock:
            return DesiredState(
                containers=dict(self._items["containers"]),
                networks=dict(self._items["networks"]),
                processes=dict(self._items["processes"]),
                manifest=self._manifest,
            ).effective()

    def prefetch(self) -> list[str]:
        """The images config-sync asks this node to pull ahead of a wave (every environment)."""
        with self._lock:
            return sorted({i for images in self._prefetch.values() for i in images})

    def errors(self) -> dict[str, str]:
        with self._lock:
            return dict(self._errors)


def _manifest(doc: Mapping[str, Any]) -> Manifest:
    return Manifest(generation=int(doc["generation"]), commit=str(doc["commit"]), items=dict(doc["items"]))
