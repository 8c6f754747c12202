"""The desired state of this node, assembled from desired-plane messages.

The loop feeds every MQTT message here (from the network thread) and takes a
:class:`DesiredState` snapshot per pass. Every payload is size-checked, parsed and
validated with ``schemas`` first; an invalid one is recorded as an error for the node
status and ignored (the last valid payload of that topic stays in effect). The
``prefetch/<env>`` topics (images to pull ahead of a rollout's wave) are kept apart: they
are no part of the desired state (:meth:`DesiredStore.prefetch`).

A broker node may replay an older retained set (a clustered broker whose retained index
lags): a manifest below the generation this agent applied is ignored, and the last few
payloads of each item are kept so the manifest picks the one it lists, whatever order
the replay and the live messages came in.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any

from node_agent.errors import printable
from node_agent.models import DesiredState, Manifest
from schemas import PayloadError, Topics, check_payload, load_json

ITEM_KINDS = ("containers", "networks", "processes")
KEPT_PAYLOADS = 4  # per item: the payloads last received, by digest, for the manifest to pick from


class DesiredStore:
    """Thread-safe map of this node's desired topics to their validated payloads."""

    def __init__(self, topics: Topics, node: str, *, max_payload_bytes: int = 1 << 20) -> None:
        self.topics = topics
        self.node = node
        self.max_payload_bytes = max_payload_bytes
        self._lock = threading.Lock()
        self._items: dict[str, dict[str, dict[str, Any]]] = {k: {} for k in ITEM_KINDS}
        # item key -> digest -> payload, the last KEPT_PAYLOADS received (oldest first)
        self._kept: dict[str, dict[str, dict[str, dict[str, Any]]]] = {k: {} for k in ITEM_KINDS}
        self._manifest: Manifest | None = None
        self._floor = 0  # the generation applied: a manifest below it is a stale replay
        self.stale_manifests = 0  # manifests ignored for that
        self._prefetch: dict[str, tuple[str, ...]] = {}  # env -> images to pull ahead
        self._errors: dict[str, str] = {}  # topic -> why its payload was ignored

    def apply(self, topic: str, payload: bytes | None, *, retained: bool = False) -> bool:
        """Record one message; return True when the desired state changed. ``retained``: a
        broker's replay or a read-back, not a live publication: a manifest in one below the
        generation held is an older retained set, ignored (a live one only below the applied)."""
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
                held = self._manifest.generation if retained and self._manifest is not None else 0
                if doc is not None and int(doc["generation"]) < max(self._floor, held):
                    self.stale_manifests += 1  # a broker node serving an older set
                    return False
                before: Any = self._manifest
                self._manifest = None if doc is None else _manifest(doc)
                for listed, digest in (self._manifest.items if self._manifest is not None else {}).items():
                    kind_of, _, item = listed.partition("/")  # its items current, as received
                    received = self._kept.get(kind_of, {}).get(item, {}).get(digest)
                    if received is not None:
                        self._items[kind_of][item] = received
                return bool(before != self._manifest)
            items, kept = self._items[kind], self._kept[kind]
            if doc is None:
                kept.pop(key, None)
                return items.pop(key, None) is not None
            got = str(doc.get("digest"))
            recent = kept.setdefault(key, {})
            recent.pop(got, None)
            recent[got] = doc
            while len(recent) > KEPT_PAYLOADS:
                del recent[next(iter(recent))]
            listed_digest = self._manifest.items.get(f"{kind}/{key}") if self._manifest is not None else None
            if retained and listed_digest is not None and listed_digest != got and listed_digest in recent:
                return False  # an older payload replayed: kept, the manifest's stays current
            before = items.get(key)
            items[key] = doc
            return bool(before != doc)

    def complete_generation(self) -> int | None:
        """The manifest's generation when it and every item it lists (with its digest) are
        here, nothing waited for (:meth:`is_waiting`), else None: what the agent needs to act
        on a change without waiting for more."""
        if self.is_waiting():
            return None
        with self._lock:
            return self._manifest.generation if self._manifest is not None else None

    def is_waiting(self) -> bool:
        """Whether the state waits for more of a publication: no manifest, an item received
        newer than the manifest (its manifest not yet), or an item it lists not received."""
        with self._lock:
            if self._manifest is None:
                return True
            listed = self._manifest.items
            for kind in ITEM_KINDS:
                for key, doc in self._items[kind].items():
                    want = listed.get(f"{kind}/{key}")
                    if want is not None and doc.get("digest") != want:
                        return True
            for key, want in listed.items():
                kind, _, item_id = key.partition("/")
                if want not in self._kept.get(kind, {}).get(item_id, {}):
                    return True
            return False

    def applied(self, generation: int) -> None:
        """The node converged on manifest ``generation``: config-sync never publishes a
        changed manifest at or below it, so one below it is an older retained set replayed."""
        with self._lock:
            self._floor = max(self._floor, generation)

    def apply_all(self, messages: Mapping[str, bytes], *, retained: bool = False) -> None:
        for topic, payload in sorted(messages.items()):
            self.apply(topic, payload, retained=retained)

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
                containers=self._listed("containers"),
                networks=self._listed("networks"),
                processes=self._listed("processes"),
                manifest=self._manifest,
            ).effective()

    def _listed(self, kind: str) -> dict[str, dict[str, Any]]:
        """The items of ``kind``: each the payload the manifest lists when it was received
        (not necessarily the last one), else the last one."""
        out = dict(self._items[kind])
        listed = self._manifest.items if self._manifest is not None else {}
        for key, doc in out.items():
            want = listed.get(f"{kind}/{key}")
            if want is not None and doc.get("digest") != want and want in self._kept[kind].get(key, {}):
                out[key] = self._kept[kind][key][want]
        return out

    def prefetch(self) -> list[str]:
        """The images config-sync asks this node to pull ahead of a wave (every environment)."""
        with self._lock:
            return sorted({i for images in self._prefetch.values() for i in images})

    def errors(self) -> dict[str, str]:
        with self._lock:
            return dict(self._errors)


def _manifest(doc: Mapping[str, Any]) -> Manifest:
    return Manifest(generation=int(doc["generation"]), commit=str(doc["commit"]), items=dict(doc["items"]))
