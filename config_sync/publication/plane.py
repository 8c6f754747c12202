"""The desired plane, purely: what a rendering makes of what is published, and the diff.

``desired_state`` merges a rendering into what is published (only the environments a
ref owns); ``desired_diff`` lists what changed (items, clears, manifests: unordered
parts of a :class:`PublicationOrder`); ``sync_payload`` is an environment's ``sync`` topic.
``publication.publication_order`` combines them. No I/O here: payloads in, values out.
"""

from __future__ import annotations

import functools
from collections.abc import Collection, Mapping
from typing import Any

from config_sync.models import PublicationOrder
from phrame.config_repo.render import carry_forward
from schemas import Topic, Topics, canonical_json, load_json
from schemas.topics import ITEM_KINDS

OWNED = (*ITEM_KINDS, "manifest", "service")  # the sync topic is decided separately


@functools.lru_cache(maxsize=1 << 16)  # a sync parses each topic several times
def _parse(topics: Topics, topic: str) -> Topic | None:
    try:
        parsed = topics.parse(topic)
    except ValueError:
        return None
    return parsed if parsed.plane == "desired" and parsed.kind in OWNED else None


def owned_topic(topics: Topics, topic: str) -> Topic | None:
    """``topic`` parsed if it is a desired-plane topic config-sync owns (not ``sync``), else None."""
    return _parse(topics, topic)


class _CachedTopics(Topics):
    """``Topics`` whose ``parse`` is memoized: ``carry_forward`` parses each manifest every pass."""

    def parse(self, topic: str) -> Topic:
        return _parse_any(self.prefix, topic)


@functools.lru_cache(maxsize=1 << 16)
def _parse_any(prefix: str, topic: str) -> Topic:
    return Topics(prefix).parse(topic)


def decode(
    published: Mapping[str, bytes],
    topics: Topics,
    cache: dict[str, tuple[bytes, dict[str, Any]]] | None = None,
) -> dict[str, dict[str, Any]]:
    """The owned topics of ``published`` as JSON objects (unreadable payloads are left out,
    so they count as absent and get overwritten). ``cache`` keeps decodings across passes."""
    out = {}
    for topic, raw in published.items():
        if _parse(topics, topic) is None:
            continue
        hit = cache.get(topic) if cache is not None else None
        if hit is not None and (hit[0] is raw or hit[0] == raw):
            out[topic] = hit[1]
            continue
        try:
            doc = load_json(raw)
        except ValueError:
            continue
        if isinstance(doc, dict):
            out[topic] = doc
            if cache is not None:
                cache[topic] = (raw, doc)
    return out


def desired_state(
    rendered: Mapping[str, dict[str, Any]],
    published: Mapping[str, bytes],
    *,
    topics: Topics,
    commit: str,
    environments: Collection[str] | None = None,
    previous: dict[str, dict[str, Any]] | None = None,
    nodes: Collection[str] | None = None,
    floor: Mapping[str, int] | None = None,
) -> dict[str, dict[str, Any]]:
    """The whole owned desired plane after applying ``rendered`` to ``environments``
    (``None``: all). Items of other environments stay as published; every node's
    manifest is rebuilt from its items, then generations and commits are carried forward.

    Manifests go to ``nodes`` (the fleet: the default ref's inventory, whichever ref
    publishes, so two refs never disagree on it; ``None``: the nodes ``rendered`` has a
    manifest for) and to any node holding an item. A manifest that changes gets a
    generation above ``floor`` (the highest published before, per node)."""
    if previous is None:
        previous = decode(published, topics)

    def in_scope(parsed: Topic) -> bool:
        return environments is None or parsed.environment in environments

    items: dict[str, dict[str, Any]] = {}
    fleet: set[str] = set(nodes or ())
    placed: list[tuple[str, str, str]] = []  # (node, "<kind>/<item id>", digest) of each item

    def take(topic: str, parsed: Topic, payload: dict[str, Any]) -> None:
        items[topic] = payload
        if parsed.node is not None:
            placed.append((parsed.node, f"{parsed.kind}/{parsed.item_id}", str(payload.get("digest"))))

    for topic, payload in rendered.items():
        parsed = _parse(topics, topic)
        if parsed is None:
            continue
        if parsed.kind == "manifest":
            if nodes is None:
                fleet.add(str(parsed.node))
        elif in_scope(parsed):
            take(topic, parsed, payload)
    for topic, payload in previous.items():
        parsed = _parse(topics, topic)
        if parsed is not None and parsed.kind != "manifest" and not in_scope(parsed):
            take(topic, parsed, payload)
    per_node: dict[str, dict[str, str]] = {n: {} for n in fleet}
    for node, key, item_digest in placed:
        per_node.setdefault(node, {})[key] = item_digest
    new = dict(items)
    for node, node_items in per_node.items():
        new[topics.manifest(node)] = {
            "generation": 1,
            "commit": commit,
            "items": dict(sorted(node_items.items())),
        }
    out = carry_forward(new, previous, _CachedTopics(topics.prefix))
    for node in per_node:
        topic = topics.manifest(node)
        manifest = out[topic]
        above = (floor or {}).get(node, 0) + 1
        if manifest is not previous.get(topic) and manifest["generation"] < above:
            out[topic] = {**manifest, "generation": above}
    return out


def desired_diff(
    desired: Mapping[str, dict[str, Any]],
    published: Mapping[str, bytes],
    topics: Topics,
    *,
    previous: Mapping[str, dict[str, Any]] | None = None,
) -> PublicationOrder:
    """Messages that turn ``published`` into ``desired`` (owned topics only; sorted; no
    ``sync`` topics). A payload that is the very object decoded from ``published``
    (``previous``) is unchanged."""
    items: list[tuple[str, bytes]] = []
    manifests: list[tuple[str, bytes]] = []
    for topic, wanted in desired.items():
        if previous is not None and previous.get(topic) is wanted:
            continue  # carried forward untouched: byte for byte what is published
        parsed = _parse(topics, topic)
        if parsed is None:
            continue
        payload = canonical_json(wanted)
        if published.get(topic) == payload:
            continue
        (manifests if parsed.kind == "manifest" else items).append((topic, payload))
    clears = sorted(
        t for t, raw in published.items() if raw and t not in desired and _parse(topics, t) is not None
    )
    return PublicationOrder(
        items=tuple(sorted(items)), clears=tuple(clears), manifests=tuple(sorted(manifests))
    )


def sync_payload(
    *,
    environment: str,
    ref: str,
    commit: str,
    errors: list[dict[str, Any]],
    previous: Mapping[str, Any] | None,
    now: float,
    held: list[dict[str, Any]] | None = None,
    hold: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The environment's ``sync`` topic: ``last_attempted`` vs ``last_applied`` (as Flux keeps
    them). The same outcome for the same commit returns ``previous`` unchanged, so an
    idle re-sync publishes nothing. ``held``: the staged rollouts of this commit not complete
    (running, waiting for a promotion, paused or rolled back); while there is one the commit
    is valid but not applied (``last_applied`` stays), and the ``rollouts`` field lists them.
    ``hold``: the commit is held whole (waiting for approvals, frozen): not applied either,
    and the ``hold`` field says why."""
    ok = not errors
    prev = dict(previous or {})
    attempted = prev.get("last_attempted") or {}
    same = (
        attempted.get("commit"),
        prev.get("ok"),
        prev.get("errors", []),
        prev.get("ref"),
        prev.get("rollouts"),
        prev.get("hold"),
    )
    if same == (commit, ok, errors, ref, held or None, hold or None):
        return prev
    waits = bool(held) or bool(hold)
    applied = {"commit": commit, "ts": now} if ok and not waits else prev.get("last_applied")
    if ok and not waits and (prev.get("last_applied") or {}).get("commit") == commit:
        applied = prev["last_applied"]  # released from a hold: applied when it first was
    payload = {
        "environment": environment,
        "ref": ref,
        "commit": commit,
        "ok": ok,
        "errors": errors,
        "last_attempted": {"commit": commit, "ok": ok, "ts": now},
        "last_applied": applied,
        "ts": now,
    }
    if held:
        payload["rollouts"] = held
    if hold:
        payload["hold"] = hold
    return payload
