"""The plan digest: a stable hash of what a move between two renderings changes, item by item.

``Syncer.review`` puts it in the merge request's plan note (the merge base → the MR head) and
the merge check computes it again for the merge result (the target's previously deployed
commit → the merged head). What it covers: every item topic config-sync owns
(``<node>/<kind>/<item>``: containers, networks, processes) whose spec digest differs between
the two, with its new spec digest, or ``null`` when the item is removed; sorted, as canonical
JSON, hashed with SHA-256. Node manifests, bookkeeping fields (the ``commit`` an item names)
and anything unchanged are left out, so the same change reviewed on another base has the same
digest. Pure.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

from config_sync.publication.plane import owned_topic
from schemas import Topics, canonical_json
from schemas.topics import ITEM_KINDS

PREFIX = "sha256:"


def plan_items(
    old: Mapping[str, dict[str, Any]], new: Mapping[str, dict[str, Any]], topics: Topics
) -> list[tuple[str, str | None]]:
    """``(<node>/<kind>/<item>, new spec digest or None)`` for each item the move changes."""
    out = []
    for topic in sorted(set(old) | set(new)):
        parsed = owned_topic(topics, topic)
        if parsed is None or parsed.kind not in ITEM_KINDS:
            continue
        before, after = old.get(topic), new.get(topic)
        was = before.get("digest") if before is not None else None
        now = after.get("digest") if after is not None else None
        if before is not None and after is not None and was == now:
            continue
        if before is None and after is None:
            continue
        out.append((f"{parsed.node}/{parsed.kind}/{parsed.item_id}", str(now) if after is not None else None))
    return out


def plan_digest(old: Mapping[str, dict[str, Any]], new: Mapping[str, dict[str, Any]], topics: Topics) -> str:
    """``sha256:<hex>`` of :func:`plan_items` as canonical JSON (a list of pairs)."""
    items = [[key, digest] for key, digest in plan_items(old, new, topics)]
    return PREFIX + hashlib.sha256(canonical_json(items)).hexdigest()
