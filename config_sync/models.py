"""The value types config-sync's decisions pass around (frozen: a decision never edits them).

``syncing`` builds a :class:`Reading` per commit and a :class:`Claim` per publication;
``publication.publication_order`` turns them into a :class:`PublicationOrder`, which
``publishing`` sends step by step; ``review_note`` describes a commit as :class:`Change` s.
No I/O and no behaviour beyond reading the fields.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from config_sync.notify.events import Target
from phrame.config_repo.update_policy import UpdatePolicy
from schemas import Topics

Message = tuple[str, bytes | None]  # topic, payload (None: clear the retained topic)


@dataclass(frozen=True)
class Reading:
    """What one commit holds, as far as a sync cares (cached by sha: a commit never changes)."""

    sha: str
    tracks: dict[str, str]  # environment -> the ref it tracks (best effort on an invalid repo)
    errors: list[dict[str, Any]]
    rendered: dict[str, dict[str, Any]] | None  # every desired topic; None when invalid
    nodes: frozenset[str] = frozenset()  # the inventory (nodes/) at this commit
    policies: dict[tuple[str, str], UpdatePolicy] = field(default_factory=dict)  # staged rollouts
    unassigned: tuple[str, ...] = ()  # replicas (item ids) no node is assigned to at this commit
    notify: dict[str, tuple[Target, ...]] = field(default_factory=dict)  # environment -> notify: targets
    # environment -> its ``protected:`` and ``freeze:`` as written (config_sync.approvals)
    protections: dict[str, dict[str, Any]] = field(default_factory=dict)

    def tracking(self, ref: str) -> set[str]:
        return {env for env, track in self.tracks.items() if track == ref}


@dataclass(frozen=True)
class Claim:
    """What a ref publishes from one reading (decided by ``Syncer`` from the default ref)."""

    environments: frozenset[str]  # the ref publishes these
    handed_over: frozenset[str] = frozenset()  # declared here but another ref's: never cleared
    nodes: frozenset[str] | None = None  # the fleet; None: the nodes of the rendering
    declared: frozenset[str] | None = None  # the default ref's environments (it alone clears others)
    # False: a merge request's preview (config_sync.previews): no ``sync`` topic, so no ref's
    # publication counts it as an environment of its own to clear; its state is its ``preview`` topic
    reports_sync: bool = True


@dataclass(frozen=True)
class PublicationOrder:
    """One publication, in order: items, clears, then each changed manifest, then the
    environments' ``sync`` topics. Sent as two acknowledged steps (:meth:`steps`), so a
    manifest goes out only once every item it names is on the broker."""

    items: tuple[tuple[str, bytes], ...] = ()  # items and service declarations
    clears: tuple[str, ...] = ()
    manifests: tuple[tuple[str, bytes], ...] = ()
    sync: tuple[Message, ...] = ()  # sync topics, and clears of environments gone

    def steps(self) -> tuple[list[Message], list[Message]]:
        return [*self.items, *((t, None) for t in self.clears)], [*self.manifests, *self.sync]

    def batches(self, topics: Topics, nodes_per_batch: int) -> list[list[Message]]:
        """The two steps cut by node into acknowledged batches that overlap: the first holds
        the items and clears of the first ``nodes_per_batch`` nodes (and every topic of no
        node: service declarations), each next one the manifests of the nodes before and the
        items of the next nodes, the last the last manifests and the ``sync`` topics. A
        manifest still goes out only once its own node's items are acknowledged, but a node's
        manifest follows its items by one batch, not by the whole fleet's items (at 10,000
        nodes that was 20 s, and an agent passed in between), and agents start while the rest
        is sent. With no more nodes than ``nodes_per_batch`` it is :meth:`steps`."""
        first, second = self.steps()
        owners = [topics.node_of(t) for t, _ in self.manifests]  # each manifest's node
        node_batch: dict[str | None, int] = {}  # node -> its batch, in the order of the manifests
        for node in owners:
            if node is not None and node not in node_batch:
                node_batch[node] = len(node_batch) // nodes_per_batch
        if len(node_batch) <= nodes_per_batch:
            return [step for step in (first, second) if step]
        last = max(node_batch.values()) + 1
        batches: list[list[Message]] = [[] for _ in range(last + 1)]
        for message in first:  # a node without a changed manifest: its items in the first batch
            batches[node_batch.get(topics.node_of(message[0]), 0)].append(message)
        for node, message in zip(owners, self.manifests, strict=True):
            batches[node_batch.get(node, last - 1) + 1].append(message)
        batches[last].extend(self.sync)
        return [batch for batch in batches if batch]

    def publication_messages(self) -> list[Message]:
        first, second = self.steps()
        return first + second

    @property
    def is_empty(self) -> bool:
        return not (self.items or self.clears or self.manifests or self.sync)

    def changed_nodes(self, topics: Topics) -> list[str]:
        return sorted({n for t, _ in self.manifests if (n := topics.parse(t).node) is not None})


@dataclass(frozen=True, order=True)
class Change:
    """One item a commit adds, changes (which fields) or removes on a node (the review note)."""

    node: str
    kind: str
    item_id: str
    action: str  # add | change | remove
    fields: tuple[str, ...] = ()
