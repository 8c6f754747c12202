"""Whether a deploy is done, and the words for its status: pure, for :mod:`config_sync.deploys.watcher`.

(node statuses, the commit, each node's published generation, the nodes offline by the
shared node-health rule) -> success / running / failed text. Never does I/O, never reads
a clock.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def is_converged(
    status: Mapping[str, Any] | None, commit: str, generation: int, ceiling: int | None = None
) -> bool:
    """Converged on the manifest ``generation`` published for ``commit``, or on a later one.

    A later generation of the node's manifest still holds this commit's items unless a
    newer commit of the same ref replaced them, and that deploy cancels this one; so two
    refs changing one node close together both succeed once it converges on the last.
    Config-sync never publishes a node's manifest at a lower generation, nor at or below
    one an agent reported applied (publishing.py), so an old ``applied`` never passes.
    ``ceiling``: the highest generation published for the node since config-sync started;
    a status above it predates a restart that lost the manifests (and the statuses that
    would have raised the floor in time), so it says nothing about this commit.
    """
    if not status or status.get("converged") is not True:
        return False
    applied = status.get("generation")
    if applied is None:  # a status that names no generation: only its commit can tell
        return status.get("commit") == commit
    if not isinstance(applied, int) or isinstance(applied, bool):
        return False
    return applied >= generation and (ceiling is None or applied <= ceiling)


def verdict(
    statuses: Mapping[str, dict[str, Any]],
    commit: str,
    nodes: Mapping[str, int],
    ceilings: Mapping[str, int] | None = None,
    offline: Mapping[str, str] | None = None,
) -> tuple[str, str]:
    """``("success", ...)`` when every node converged on its generation (``nodes``: node ->
    the generation published for ``commit``), else ``("running", who)``; ``offline``: node ->
    why it is offline, named after it."""
    waiting = waiting_for(statuses, commit, nodes, ceilings)
    if not waiting:
        return "success", f"{len(nodes)} node(s) converged on {commit[:12]}"
    return "running", waiting_text(waiting, offline or {})


def waiting_for(
    statuses: Mapping[str, dict[str, Any]],
    commit: str,
    nodes: Mapping[str, int],
    ceilings: Mapping[str, int] | None = None,
) -> list[str]:
    """The nodes not yet converged on their generation, sorted."""
    top = ceilings or {}
    return [
        n for n, gen in sorted(nodes.items()) if not is_converged(statuses.get(n), commit, gen, top.get(n))
    ]


def waiting_text(waiting: list[str], offline: Mapping[str, str]) -> str:
    """``waiting for edge-01, edge-02 (offline: no heartbeat for 45 s)``."""
    return "waiting for " + ", ".join(f"{n} (offline: {offline[n]})" if n in offline else n for n in waiting)


def failure(
    statuses: Mapping[str, dict[str, Any]],
    commit: str,
    nodes: Mapping[str, int],
    ceilings: Mapping[str, int] | None = None,
    offline: Mapping[str, str] | None = None,
) -> str:
    """The first node that did not converge, and why, for the failed status."""
    found = first_failure(statuses, commit, nodes, ceilings, offline)
    return "converged" if found is None else f"{found[0]}: {found[1]}"


def first_failure(
    statuses: Mapping[str, dict[str, Any]],
    commit: str,
    nodes: Mapping[str, int],
    ceilings: Mapping[str, int] | None = None,
    offline: Mapping[str, str] | None = None,
) -> tuple[str, str] | None:
    """``(node, why)`` of the first node that did not converge; None when all did."""
    top, down = ceilings or {}, offline or {}
    for node, generation in sorted(nodes.items()):
        status = statuses.get(node)
        if is_converged(status, commit, generation, top.get(node)):
            continue
        if node in down:  # by the shared rule: what it last said is not news any more
            return node, f"offline ({down[node]})"
        if not status:
            return node, "no status reported"
        errors = status.get("errors") or []
        if errors:
            first = errors[0]
            text = first.get("message", first) if isinstance(first, dict) else first
            return node, str(text)
        if status.get("state") == "offline":
            return node, "offline"
        at = f"{str(status.get('commit'))[:12]}, generation {status.get('generation')} of {generation}"
        return node, f"not converged (at {at})"
    return None
