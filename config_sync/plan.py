"""The pure decisions of a sync: what to publish, what to clear, and the human plan.

``desired_state`` merges a rendering into what is published (only the environments a
ref owns); ``publish_plan`` orders the messages: changed items first, then clears, then
each changed node's manifest, so an agent never prunes on a half-published generation.
``item_changes`` and ``plan_markdown`` describe a commit for people (MR note, CLI).
No I/O here: callers hand in payloads and get actions back.
"""

from __future__ import annotations

import functools
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import Any

from config_repo.render import carry_forward
from schemas import Topic, Topics, canonical_json, load_json
from schemas.topics import ITEM_KINDS

PLAN_MARKER = "<!-- phrame:plan -->"
OWNED = (*ITEM_KINDS, "manifest", "service")  # the sync topic is decided separately
_BOOKKEEPING = ("digest", "commit")


@dataclass(frozen=True)
class PublishPlan:
    items: list[tuple[str, bytes]] = field(default_factory=list)  # items and service declarations
    clears: list[str] = field(default_factory=list)
    manifests: list[tuple[str, bytes]] = field(default_factory=list)

    def messages(self) -> list[tuple[str, bytes | None]]:
        """Publication order: items, clears (empty retained payload), manifests last."""
        out: list[tuple[str, bytes | None]] = list(self.items)
        out += [(t, None) for t in self.clears]
        out += self.manifests
        return out

    @property
    def is_empty(self) -> bool:
        return not (self.items or self.clears or self.manifests)

    def changed_nodes(self, topics: Topics) -> list[str]:
        return sorted({n for t, _ in self.manifests if (n := topics.parse(t).node) is not None})


@functools.lru_cache(maxsize=1 << 16)  # a sync parses each topic several times
def _parse(topics: Topics, topic: str) -> Topic | None:
    try:
        parsed = topics.parse(topic)
    except ValueError:
        return None
    return parsed if parsed.plane == "desired" and parsed.kind in OWNED else None


class _CachedTopics(Topics):
    """``Topics`` whose ``parse`` is memoized: ``carry_forward`` parses every topic twice a pass."""

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
        if hit is not None and hit[0] == raw:
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
    for topic, payload in rendered.items():
        parsed = _parse(topics, topic)
        if parsed is None:
            continue
        if parsed.kind == "manifest":
            if nodes is None:
                fleet.add(str(parsed.node))
        elif in_scope(parsed):
            items[topic] = payload
    for topic, payload in previous.items():
        parsed = _parse(topics, topic)
        if parsed is not None and parsed.kind != "manifest" and not in_scope(parsed):
            items[topic] = payload
    per_node: dict[str, dict[str, str]] = {n: {} for n in fleet}
    for topic, payload in items.items():
        parsed = _parse(topics, topic)
        if parsed is not None and parsed.node is not None:
            per_node.setdefault(parsed.node, {})[f"{parsed.kind}/{parsed.item_id}"] = str(
                payload.get("digest")
            )
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


def publish_plan(
    desired: Mapping[str, dict[str, Any]],
    published: Mapping[str, bytes],
    topics: Topics,
    *,
    previous: Mapping[str, dict[str, Any]] | None = None,
) -> PublishPlan:
    """Messages that turn ``published`` into ``desired`` (owned topics only; sorted).
    A payload that is the very object decoded from ``published`` (``previous``) is unchanged."""
    plan = PublishPlan()
    for topic in sorted(desired):
        parsed = _parse(topics, topic)
        if parsed is None:
            continue
        if previous is not None and previous.get(topic) is desired[topic]:
            continue  # carried forward untouched: byte for byte what is published
        payload = canonical_json(desired[topic])
        if published.get(topic) == payload:
            continue
        (plan.manifests if parsed.kind == "manifest" else plan.items).append((topic, payload))
    for topic in sorted(published):
        if topic not in desired and published[topic] and _parse(topics, topic) is not None:
            plan.clears.append(topic)
    return plan


def sync_payload(
    *,
    environment: str,
    ref: str,
    commit: str,
    errors: list[dict[str, Any]],
    previous: Mapping[str, Any] | None,
    now: float,
) -> dict[str, Any]:
    """The environment's ``sync`` topic: ``last_attempted`` vs ``last_applied`` (as Flux keeps
    them). The same outcome for the same commit returns ``previous`` unchanged, so an
    idle re-sync publishes nothing."""
    ok = not errors
    prev = dict(previous or {})
    attempted = prev.get("last_attempted") or {}
    same = (attempted.get("commit"), prev.get("ok"), prev.get("errors", []), prev.get("ref"))
    if same == (commit, ok, errors, ref):
        return prev
    applied = {"commit": commit, "ts": now} if ok else prev.get("last_applied")
    return {
        "environment": environment,
        "ref": ref,
        "commit": commit,
        "ok": ok,
        "errors": errors,
        "last_attempted": {"commit": commit, "ok": ok, "ts": now},
        "last_applied": applied,
        "ts": now,
    }


@dataclass(frozen=True, order=True)
class Change:
    node: str
    kind: str
    item_id: str
    action: str  # add | change | remove
    fields: tuple[str, ...] = ()


def item_changes(
    old: Mapping[str, dict[str, Any]], new: Mapping[str, dict[str, Any]], topics: Topics
) -> list[Change]:
    """Per node, the items a move from ``old`` to ``new`` adds, changes (which fields) or removes."""
    changes = []
    for topic in sorted(set(old) | set(new)):
        parsed = _parse(topics, topic)
        if parsed is None or parsed.kind not in ITEM_KINDS:
            continue
        before, after = old.get(topic), new.get(topic)
        node, kind, item = str(parsed.node), parsed.kind, str(parsed.item_id)
        if before is None and after is not None:
            changes.append(Change(node, kind, item, "add"))
        elif after is None and before is not None:
            changes.append(Change(node, kind, item, "remove"))
        elif before is not None and after is not None and before.get("digest") != after.get("digest"):
            keys = (set(before) | set(after)) - set(_BOOKKEEPING)
            fields = tuple(sorted(k for k in keys if before.get(k) != after.get(k)))
            changes.append(Change(node, kind, item, "change", fields))
    return sorted(changes)


def _cell(text: Any) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def plan_markdown(
    changes: list[Change], errors: list[dict[str, Any]], *, commit: str, ref: str | None = None
) -> str:
    """The plan as Markdown: errors first, then one table per node (the MR note body)."""
    where = f" into `{ref}`" if ref else ""
    lines = [PLAN_MARKER, f"### Phrame plan for `{commit[:12]}`{where}", ""]
    if errors:
        lines += [f"**{len(errors)} problem(s): this commit will not be deployed.**", ""]
        lines += ["| file | rule | message |", "|---|---|---|"]
        for e in errors:
            place = f"{e.get('file', '?')}:{e.get('line', 1)}:{e.get('column', 1)}"
            lines.append(f"| `{_cell(place)}` | {_cell(e.get('rule', ''))} | {_cell(e.get('message', ''))} |")
        return "\n".join(lines) + "\n"
    if not changes:
        return "\n".join([*lines, "No changes to any node."]) + "\n"
    counts = {a: sum(c.action == a for c in changes) for a in ("add", "change", "remove")}
    lines += [f"{counts['add']} to add, {counts['change']} to change, {counts['remove']} to remove.", ""]
    for node in sorted({c.node for c in changes}):
        lines += [f"#### {node}", "", "| action | kind | item | changed fields |", "|---|---|---|---|"]
        for c in (c for c in changes if c.node == node):
            fields = ", ".join(f"`{f}`" for f in c.fields)
            lines.append(f"| {c.action} | {c.kind[:-1]} | `{c.item_id}` | {fields} |")
        lines.append("")
    return "\n".join(lines)
