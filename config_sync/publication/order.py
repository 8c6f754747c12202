"""The one decision of a publication: what is published, what is cleared, in which order.

``DesiredPublisher.publish_commit`` calls :func:`publication_order` with what the broker holds
and sends the result's :meth:`~config_sync.models.PublicationOrder.steps` as they are;
the unit tests test this very function. Pure: no broker, no clock (``now`` is handed in),
no state kept. An invalid commit (``errors``) orders only its environments' ``sync`` topics.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import Any

from config_sync.models import Claim, Message, PublicationOrder
from config_sync.publication.plane import decode, desired_diff, desired_state, sync_payload
from schemas import Topics, canonical_json, load_json


@dataclass(frozen=True)
class Decision:
    """The order, and the desired plane it publishes (the publisher keeps its decodings)."""

    order: PublicationOrder
    desired: Mapping[str, dict[str, Any]] = field(default_factory=dict)
    gone: tuple[str, ...] = ()  # environments cleared: no ref publishes them any more


def publication_order(
    *,
    ref: str,
    commit: str,
    claim: Claim,
    rendered: Mapping[str, dict[str, Any]] | None,
    errors: list[dict[str, Any]],
    published: Mapping[str, bytes],
    topics: Topics,
    now: float,
    previous: dict[str, dict[str, Any]] | None = None,
    floor: Mapping[str, int] | None = None,
    held: Mapping[str, list[dict[str, Any]]] | None = None,
    holds: Mapping[str, dict[str, Any]] | None = None,
) -> Decision:
    """What turns ``published`` into ``ref`` at ``commit``: changed items, clears, changed
    manifests last, then the ``sync`` topics (and clears of the environments gone).

    ``previous``: ``published`` decoded (computed when absent). ``floor``: per node, the
    generation a changed manifest must exceed. Environments ``ref`` published before but no
    longer claims (nor hands over) are cleared; with ``claim.declared`` (the default ref),
    so is any environment no ref declares. ``held``: per environment, the staged rollouts
    that keep its commit from being applied (the ``sync`` topic says so); ``holds``: per
    environment, why its commit is held whole (approvals, a freeze: ``hold``)."""
    diff, desired, gone = PublicationOrder(), {}, []
    if not errors and rendered is not None:
        mine = environments_of(ref, published, topics)
        if claim.declared is not None:
            mine |= environments_of(None, published, topics) - claim.declared
        gone = sorted(mine - claim.environments - claim.handed_over)
        if previous is None:
            previous = decode(published, topics)
        desired = desired_state(
            rendered,
            published,
            topics=topics,
            commit=commit,
            environments={*claim.environments, *gone},
            previous=previous,
            nodes=claim.nodes,
            floor=floor,
        )
        diff = desired_diff(desired, published, topics, previous=previous)
    sync = (
        _sync_messages(
            ref, commit, claim.environments, errors, published, topics, now, held or {}, holds or {}
        )
        if claim.reports_sync
        else []
    )
    sync += [(topics.env_sync(env), None) for env in gone]
    order = PublicationOrder(items=diff.items, clears=diff.clears, manifests=diff.manifests, sync=tuple(sync))
    return Decision(order, desired, tuple(gone))


def _sync_messages(
    ref: str,
    commit: str,
    environments: Collection[str],
    errors: list[dict[str, Any]],
    published: Mapping[str, bytes],
    topics: Topics,
    now: float,
    held: Mapping[str, list[dict[str, Any]]],
    holds: Mapping[str, dict[str, Any]],
) -> list[Message]:
    out: list[Message] = []
    for env in sorted(environments):
        topic = topics.env_sync(env)
        previous = json_object(published.get(topic))
        payload = sync_payload(
            environment=env,
            ref=ref,
            commit=commit,
            errors=errors,
            previous=previous,
            now=now,
            held=None if errors else held.get(env),
            hold=None if errors else holds.get(env),
        )
        raw = canonical_json(payload)
        if raw != published.get(topic):
            out.append((topic, raw))
    return out


def environments_of(ref: str | None, published: Mapping[str, bytes], topics: Topics) -> set[str]:
    """Environments whose published ``sync`` topic names ``ref`` (``None``: any ref)."""
    found = set()
    for topic, raw in published.items():
        if not topic.endswith("/sync"):
            continue  # what the broker holds is mostly items: not parsed on every pass
        try:
            parsed = topics.parse(topic)
        except ValueError:
            continue
        doc = json_object(raw) if parsed.kind == "sync" else None
        if doc is not None and ref in (None, doc.get("ref")) and parsed.environment:
            found.add(parsed.environment)
    return found


def json_object(raw: bytes | None) -> dict[str, Any] | None:
    """A payload as a JSON object; None when empty, unreadable or not an object."""
    if not raw:
        return None
    try:
        doc = load_json(raw)
    except ValueError:
        return None
    return doc if isinstance(doc, dict) else None
