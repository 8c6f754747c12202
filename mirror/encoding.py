"""A snapshot's bytes, built from each topic's JSON encoded once instead of the whole plane.

:class:`mirror.loop.MirrorLoop` hands its writer thread's :class:`SnapshotEncoder` the
topics that changed since the last snapshot; each is encoded once, kept, and the snapshot is
the kept entries joined in sorted order. The bytes are exactly :func:`encode_document`'s
(one ``json.dumps`` of the whole document, sorted keys, no spaces): readers see no
difference. At 10,000 nodes a snapshot then costs the heartbeats that changed and a join,
not an encoding of 24 MB. One thread only (the writer's): it holds no lock.
"""

from __future__ import annotations

import json
from typing import Any

REMOVED: Any = object()  # a change that clears its topic (or makes it invalid)
TOPICS = "topics"  # the document's key of the encoded entries; sorts after every other key


def canonical(value: Any) -> str:
    """The snapshot's JSON of one value: sorted keys, no spaces, ASCII."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def encode_document(document: dict[str, Any]) -> bytes:
    """The whole document encoded at once: what :class:`SnapshotEncoder` must equal."""
    return canonical(document).encode()


class SnapshotEncoder:
    """Keeps ``"topic":value`` per topic between snapshots; writer thread only."""

    def __init__(self) -> None:
        self._entries: dict[str, str] = {}
        self._order: list[str] | None = []  # the topics sorted; None: topics came or went

    def __len__(self) -> int:
        return len(self._entries)

    def apply(self, changes: dict[str, Any]) -> None:
        """Take ``topic → value`` (:data:`REMOVED`: gone) changed since the last call."""
        entries = self._entries
        for topic, value in changes.items():
            if value is REMOVED:
                if entries.pop(topic, None) is not None:
                    self._order = None
                continue
            if topic not in entries:
                self._order = None
            entries[topic] = canonical(topic) + ":" + canonical(value)

    def encode(self, head: dict[str, Any], changes: dict[str, Any]) -> bytes:
        """The document ``head`` (every key but ``topics``) with the topics held, after
        ``changes``; the bytes of :func:`encode_document` of the whole document."""
        self.apply(changes)
        if self._order is None:
            self._order = sorted(self._entries)  # as json.dumps(sort_keys=True) orders keys
        # "topics" sorts after every key of the head, so it closes the document
        assert all(key < TOPICS for key in head), sorted(head)
        opening = canonical(head)[:-1] + ("," if head else "") + f'"{TOPICS}":{{'
        entries = self._entries
        return (opening + ",".join([entries[t] for t in self._order]) + "}}").encode()
