"""Indexing one plane's snapshot topics by node and environment, once per snapshot change.

:class:`topic_api.state.ApiState` calls :func:`index_plane` when a snapshot file changed, so
each request reads a ready index instead of scanning thousands of topics. Pure: it never
reads a file and never raises on an unexpected topic (it is left out of the index, still
listed under ``/api/topics``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from schemas.topics import ITEM_KINDS


@dataclass
class NodeTopics:
    """One node's topics of one plane: manifest/status/heartbeat, items by (kind, id), and
    the reports the mirror refused (topic -> why)."""

    manifest: Any = None
    status: Any = None
    heartbeat: Any = None
    items: dict[tuple[str, str], Any] = field(default_factory=dict)
    invalid: dict[str, str] = field(default_factory=dict)


@dataclass
class EnvTopics:
    """One environment's desired topics: sync, placement, deploys, declared services and
    staged rollouts (by service)."""

    sync: Any = None
    placement: Any = None
    deploys: Any = None
    services: dict[str, Any] = field(default_factory=dict)
    rollouts: dict[str, Any] = field(default_factory=dict)


@dataclass
class PlaneIndex:
    nodes: dict[str, NodeTopics] = field(default_factory=dict)
    environments: dict[str, EnvTopics] = field(default_factory=dict)


NODE_SINGLES = ("manifest", "status", "heartbeat")
ENV_SINGLES = ("sync", "placement", "deploys")


def index_plane(
    topics: Mapping[str, Any], prefix: str, plane: str, invalid: Mapping[str, str] | None = None
) -> PlaneIndex:
    """Group ``topics`` of ``plane`` under ``prefix`` by node and environment; each refused
    report of ``invalid`` (topic -> why) goes to its sender's node, and only there."""
    head = f"{prefix}/{plane}/"
    index = PlaneIndex()
    for topic, why in (invalid or {}).items():
        parts = topic[len(head) :].split("/") if topic.startswith(head) else []
        if len(parts) >= 3 and parts[0] == "nodes" and parts[1]:
            index.nodes.setdefault(parts[1], NodeTopics()).invalid[topic] = why
    for topic, payload in topics.items():
        if not topic.startswith(head):
            continue
        parts = topic[len(head) :].split("/")
        if len(parts) >= 3 and parts[0] == "nodes" and parts[1]:
            node = index.nodes.setdefault(parts[1], NodeTopics())
            if len(parts) == 3 and parts[2] in NODE_SINGLES:
                setattr(node, parts[2], payload)
            elif len(parts) == 4 and parts[2] in ITEM_KINDS and parts[3]:
                node.items[(parts[2], parts[3])] = payload
        elif len(parts) >= 3 and parts[0] == "environments" and parts[1] and plane == "desired":
            env = index.environments.setdefault(parts[1], EnvTopics())
            if len(parts) == 3 and parts[2] in ENV_SINGLES:
                setattr(env, parts[2], payload)
            elif len(parts) == 4 and parts[2] == "services" and parts[3]:
                env.services[parts[3]] = payload
            elif len(parts) == 4 and parts[2] == "rollouts" and parts[3]:
                env.rollouts[parts[3]] = payload
    return index


def diff_topics(old: Mapping[str, Any], new: Mapping[str, Any]) -> tuple[list[str], list[str]]:
    """(topics added or changed, topics removed) between two snapshots, sorted."""
    changed = sorted(t for t, v in new.items() if t not in old or old[t] != v)
    removed = sorted(t for t in old if t not in new)
    return changed, removed
