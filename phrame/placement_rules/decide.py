"""The placement decision: current ``node.json`` + inventory + liveness + clock → new ``node.json``.

Pure and deterministic (called by the loop, the benchmark and unit tests): it reads only
its arguments, never the clock, git or MQTT. It never moves a healthy replica, never gives
a returning node its replicas back, never places a replica on an unfit node, and moves
nothing at all while no node is alive (full disruption).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from phrame.placement_rules.ledger import UNKNOWN, Ledger
from phrame.placement_rules.models import (
    SCHEMA,
    Decision,
    Move,
    NodeHealth,
    NodeInfo,
    Pending,
    ServiceSpec,
    Unassigned,
    Usage,
)


def _current(doc: Mapping[str, Any] | None) -> tuple[dict[str, list[str | None]], dict[str, str]]:
    if not doc:
        return {}, {}
    assignments = {k: list(v) for k, v in (doc.get("assignments") or {}).items() if isinstance(v, list)}
    return assignments, dict(doc.get("reasons") or {})


def decide(
    environment: str,
    *,
    nodes: Mapping[str, NodeInfo],
    services: Sequence[ServiceSpec],
    current: Mapping[str, Any] | None,
    health: Mapping[str, NodeHealth],
    now: float,
    reschedule_after: float,
    reserved: Mapping[str, Usage] | None = None,
) -> Decision:
    """Decide every label-placed replica of ``environment``; see the module docstring.

    ``current`` is the ``node.json`` document now in git (``None`` if absent); ``reserved``
    what other environments already use per node; ``now`` the clock value (seconds)."""
    if nodes and not any(health.get(n, UNKNOWN).alive for n in nodes):
        # Full disruption, as Kubernetes' node controller treats it: when not one node is
        # alive, our own view (broker, network) is the likelier fault than every node failing
        # at once, and there is nowhere to move to anyway; keep node.json as it is. When one
        # is alive again, PlacementHealth.note_decision first gives every node a whole timeout.
        held = f"no node of the inventory is alive ({len(nodes)} nodes): nothing moves until one is"
        return Decision(_normalised(environment, current), held=held)
    ledger = Ledger(nodes, health)
    for name, use in (reserved or {}).items():
        ledger.add(name, use.cpus, use.memory, count=0)
    old, old_reasons = _current(current)
    placed = sorted((s for s in services if s.is_label_placed), key=lambda s: s.name)
    for svc in services:
        if svc.pin is not None:
            ledger.add(svc.pin, svc.cpus * svc.replicas, svc.memory * svc.replicas, count=svc.replicas)

    moves: list[Move] = []
    pending: list[Pending] = []
    causes: dict[tuple[str, int], str] = {}
    new: dict[str, list[str | None]] = {}
    for svc in placed:  # pass 1: keep every replica whose node is still fit
        cur = old.get(svc.name, [])
        row: list[str | None] = [None] * svc.replicas
        for i, here in enumerate(cur[: svc.replicas]):
            if here is None:
                causes[(svc.name, i)] = "was unassigned"
                continue
            cause = _leave_cause(svc, i, here, row, nodes, health, now, reschedule_after)
            if cause is not None:
                causes[(svc.name, i)] = cause
                continue
            row[i] = here
            ledger.add(here, svc.cpus, svc.memory)
            state = health.get(here, UNKNOWN)
            if not state.alive and state.offline_since is not None:
                moves_in = max(0.0, state.offline_since + reschedule_after - now)
                pending.append(Pending(svc.name, i, here, state.offline_for(now), moves_in))
        for i, extra in enumerate(cur[svc.replicas :], start=svc.replicas):
            if extra is not None:
                moves.append(Move(svc.name, i, extra, None, f"scaled down to {svc.replicas}", True))
        new[svc.name] = row
    names = {s.name for s in placed}
    for gone in sorted(set(old) - names):
        for i, was in enumerate(old[gone]):
            if was is not None:
                moves.append(Move(gone, i, was, None, f"{gone} is no longer label-placed", True))

    unassigned: list[Unassigned] = []
    notes: dict[str, list[str]] = {}
    for svc in placed:  # pass 2: place what pass 1 left empty
        row = new[svc.name]
        why_none: str | None = None  # set once no node could take a replica of svc
        for i in range(svc.replicas):
            if row[i] is not None:
                continue
            source = old.get(svc.name, [])[i] if i < len(old.get(svc.name, [])) else None
            cause = causes.get((svc.name, i), "new replica")
            # once no node takes one replica, none takes the next: nothing was added to the
            # ledger or the row since, so pick and why_not (each a walk over every matching
            # node) would answer the same; a lost shard of 1,000 nodes asked them 1,000 times
            chosen = None if why_none is not None else ledger.pick(svc, exclude := _taken(svc, row))
            if chosen is None:
                if why_none is None:
                    why_none = ledger.why_not(svc, exclude, now)
                why = why_none
                unassigned.append(Unassigned(svc.name, i, why))
                notes.setdefault(svc.name, []).append(f"{svc.name}.{i} unassigned: {why}")
            else:
                row[i] = chosen
                ledger.add(chosen, svc.cpus, svc.memory)
                what = f"{cause}; least loaded node matching {svc.selector_text()}"
                notes.setdefault(svc.name, []).append(f"{svc.name}.{i} on {chosen}: {what}")
            if chosen != source:
                moves.append(Move(svc.name, i, source, chosen, cause))

    doc = _document(environment, placed, new, old, old_reasons, notes)
    is_changed = doc != _normalised(environment, current) and (current is not None or bool(placed))
    return Decision(doc, tuple(moves), tuple(pending), tuple(unassigned), is_changed)


def _taken(svc: ServiceSpec, row: list[str | None]) -> set[str]:
    """The nodes a new replica of ``svc`` must avoid: those of its other replicas (spread)."""
    return {n for n in row if n is not None} if svc.spread else set()


def _leave_cause(
    svc: ServiceSpec,
    index: int,
    node: str,
    row: list[str | None],
    nodes: Mapping[str, NodeInfo],
    health: Mapping[str, NodeHealth],
    now: float,
    reschedule_after: float,
) -> str | None:
    """Why replica ``index`` must leave ``node``, or ``None`` to keep it there."""
    info = nodes.get(node)
    if info is None:
        return f"{node} removed from the inventory"
    if not info.matches(svc.labels or {}):
        return f"{node} no longer matches {svc.selector_text()}"
    if info.cordoned:
        return f"{node} cordoned"
    state = health.get(node, UNKNOWN)
    if not state.alive and state.offline_for(now) > reschedule_after:
        return f"{node} offline for {int(state.offline_for(now))} s"
    if svc.spread and node in row[:index]:
        return f"{svc.name}.{row.index(node)} is also on {node} (spread)"
    return None


def _document(
    environment: str,
    placed: Sequence[ServiceSpec],
    new: Mapping[str, list[str | None]],
    old: Mapping[str, list[str | None]],
    old_reasons: Mapping[str, str],
    notes: Mapping[str, list[str]],
) -> dict[str, Any]:
    reasons: dict[str, str] = {}
    for svc in placed:
        if new[svc.name] == old.get(svc.name) and svc.name in old_reasons:
            reasons[svc.name] = old_reasons[svc.name]  # unchanged: keep the reason it was given
        elif svc.name in notes:
            reasons[svc.name] = "; ".join(notes[svc.name])
        else:
            count = svc.replicas
            reasons[svc.name] = f"{count} replica{'s' * (count != 1)} on nodes matching {svc.selector_text()}"
    return {
        "schema": SCHEMA,
        "environment": environment,
        "assignments": {name: list(row) for name, row in sorted(new.items())},
        "reasons": reasons,
    }


def _normalised(environment: str, doc: Mapping[str, Any] | None) -> dict[str, Any]:
    assignments, reasons = _current(doc)
    return {"schema": SCHEMA, "environment": environment, "assignments": assignments, "reasons": reasons}
