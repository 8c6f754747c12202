"""Turning a loaded config repo into the decision's inputs: nodes, services, reservations.

Called by the loop after reading an environment's tracked head from git; pure. Documents
that failed their schema are skipped (validation reports them), so one bad file never
stops the placement of the others.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from phrame.config_repo import ConfigRepo, Environment
from phrame.config_repo.assignment import replicas
from phrame.config_repo.quantities import memory_bytes
from phrame.placement_rules.models import NodeInfo, ServiceSpec, Usage


def _labels(raw: Any) -> dict[str, str]:
    if not isinstance(raw, dict):
        return {}
    return {str(k): _text(v) for k, v in raw.items()}


def _text(value: Any) -> str:
    # YAML `gpu: true` and `gpu: "true"` must match each other.
    return str(value).lower() if isinstance(value, bool) else str(value)


def _resources(data: dict[str, Any]) -> tuple[float, int]:
    res = data.get("resources") or {}
    return float(res.get("cpus", 0)), memory_bytes(res.get("memory", "0"))


def nodes_of(repo: ConfigRepo) -> dict[str, NodeInfo]:
    out = {}
    for name, doc in sorted(repo.nodes.items()):
        if not doc.schema_ok:
            continue
        cap = doc.data.get("capacity") or {}
        out[name] = NodeInfo(
            name=name,
            labels=_labels(doc.data.get("labels")),
            cpus=float(cap["cpus"]) if "cpus" in cap else None,
            memory=memory_bytes(cap["memory"]) if "memory" in cap else None,
            cordoned=bool(doc.data.get("cordoned", False)),
        )
    return out


def services_of(env: Environment) -> list[ServiceSpec]:
    out = []
    for name, doc in sorted(env.services.items()):
        if not doc.schema_ok:
            continue
        data = doc.data
        where = data.get("placement") or {}
        cpus, memory = _resources(data)
        labels = _labels(where["labels"]) if "labels" in where else None
        pin = where.get("node")
        if pin is None and labels is None:
            labels = {}  # no placement at all: any node will do
        out.append(
            ServiceSpec(
                name=name,
                replicas=int(data.get("replicas", 1)),
                labels=labels,
                spread=bool(where.get("spread", False)),
                pin=pin,
                cpus=cpus,
                memory=memory,
            )
        )
    return out


def reserved_elsewhere(repo: ConfigRepo, environment: str) -> dict[str, Usage]:
    """What the other environments' replicas (pinned or placed) reserve on each node."""
    cpus: dict[str, float] = defaultdict(float)
    memory: dict[str, int] = defaultdict(int)
    for rep in replicas(repo):
        if rep.environment == environment or rep.node is None:
            continue
        c, m = _resources(rep.spec)
        cpus[rep.node] += c
        memory[rep.node] += m
    return {n: Usage(cpus[n], memory[n]) for n in sorted(cpus)}


def current_document(env: Environment) -> dict[str, Any] | None:
    doc = env.placement
    if doc is None or not doc.schema_ok or not isinstance(doc.data, dict):
        return None
    return dict(doc.data)


def reschedule_after(env: Environment, default_s: float) -> float:
    """How long a replica of ``env`` waits on a node that counts as offline before it moves:
    the environment's ``disconnect.grace_s``, else ``default_s`` (``PHRAME_RESCHEDULE_AFTER_S``)."""
    disconnect = env.settings.get("disconnect")
    grace = disconnect.get("grace_s") if isinstance(disconnect, dict) else None
    if isinstance(grace, (int, float)) and not isinstance(grace, bool) and grace >= 0:
        return float(grace)
    return default_s


def mode_and_track(env: Environment, default_ref: str) -> tuple[str, str]:
    """``placement:`` and the ref followed; ``default_ref`` (PHRAME_TRACK_REF) without ``track:``."""
    return env.placement_mode, env.track(default_ref)
