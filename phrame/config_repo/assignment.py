"""Which node each replica runs on: a pin, or ``node.json`` for label-placed services.

Shared by the semantic rules (ports, capacity) and the renderer so both agree. An
assignment to a node missing from the inventory counts as unassigned: placement will
move it, and the commit that removed the node stays deployable meanwhile.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from phrame.config_repo.cache import ReadCache
from phrame.config_repo.keys import per_environment
from phrame.config_repo.model import ConfigRepo, Document, Environment


@dataclass(frozen=True)
class Replica:
    environment: str
    service: str
    index: int
    node: str | None
    doc: Document

    @property
    def item_id(self) -> str:
        return f"{self.environment}.{self.service}.{self.index}"

    @property
    def spec(self) -> dict[str, Any]:
        data: dict[str, Any] = self.doc.data
        return data


def replica_count(data: dict[str, Any]) -> int:
    return int(data.get("replicas", 1))


def _assigned(env: Environment, *, partial: bool) -> dict[str, list[Any]]:
    doc = env.placement
    if doc is None or not (doc.schema_ok or partial) or not doc.is_sound("assignments"):
        return {}
    assignments: dict[str, list[Any]] = doc.data.get("assignments", {})
    return {k: v for k, v in assignments.items() if doc.is_sound("assignments", k)}


def _is_placeable(doc: Document, *, partial: bool) -> bool:
    if doc.schema_ok:
        return True
    return partial and all(doc.is_sound(part) for part in ("kind", "replicas", "placement"))


def replicas(repo: ConfigRepo, *, partial: bool = False) -> list[Replica]:
    """Every replica of every schema-valid service, sorted by (environment, service, index).
    ``partial`` (the semantic rules) adds services with a schema error elsewhere than in
    ``kind``, ``replicas`` and ``placement``: a replica's other parts may still be unsound."""
    out = []
    for env_name in sorted(repo.environments):
        env = repo.environments[env_name]
        assigned = _assigned(env, partial=partial)
        for name in sorted(env.services):
            doc = env.services[name]
            if not _is_placeable(doc, partial=partial):
                continue
            pin = doc.data.get("placement", {}).get("node")
            chosen = assigned.get(name, [])
            for i in range(replica_count(doc.data)):
                node = pin if pin else (chosen[i] if i < len(chosen) else None)
                if node is not None and node not in repo.nodes:
                    node = None
                out.append(Replica(env_name, name, i, node, doc))
    return out


def environment_replicas(
    repo: ConfigRepo, env: Environment, *, partial: bool = False, cache: ReadCache | None = None
) -> list[Replica]:
    """:func:`replicas` of one environment (with ``repo``'s inventory). With ``cache``, kept
    by the environment's and the inventory's files: the rules' (``partial``) and the
    renderer's are one list when every service and the placement passed their schemas."""
    view = ConfigRepo(nodes=repo.nodes, environments={env.name: env}, commit=repo.commit)
    placement_ok = env.placement is None or env.placement.schema_ok
    sound = placement_ok and all(d.schema_ok for d in env.services.values())
    made = per_environment(
        cache,
        "environment-replicas",
        repo,
        env,
        lambda _e: replicas(view, partial=partial),
        "sound" if sound else partial,
    )
    return list(made)
