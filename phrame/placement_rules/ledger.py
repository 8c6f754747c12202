"""Reserved resources per node and the least-loaded choice among feasible nodes.

Used only by :mod:`phrame.placement_rules.decide` (pure, no I/O). One heap per label selector,
invalidated lazily, keeps a decision for 10,000 services on 1,000 nodes well under a
second. Ties break on a stable hash of the node name, so every run picks the same node.
"""

from __future__ import annotations

import hashlib
import heapq
from collections.abc import Mapping
from typing import Any

from phrame.config_repo.quantities import format_bytes
from phrame.placement_rules.models import NodeHealth, NodeInfo, ServiceSpec

UNKNOWN = NodeHealth(alive=False)  # no liveness known: keep what is there, place nothing new
_EPS = 1e-9


def _tiebreak(node: str) -> int:
    return int.from_bytes(hashlib.sha256(node.encode()).digest()[:8], "big")


class Ledger:
    """Reserved resources per node, and one lazily-invalidated heap per label selector."""

    def __init__(self, nodes: Mapping[str, NodeInfo], health: Mapping[str, NodeHealth]) -> None:
        self.nodes = nodes
        self.health = health
        self.cpus: dict[str, float] = dict.fromkeys(nodes, 0.0)
        self.memory: dict[str, int] = dict.fromkeys(nodes, 0)
        self.count: dict[str, int] = dict.fromkeys(nodes, 0)
        self.version: dict[str, int] = dict.fromkeys(nodes, 0)
        self.pools: dict[tuple[tuple[str, str], ...], list[tuple[Any, ...]]] = {}
        self.member_of: dict[str, list[list[tuple[Any, ...]]]] = {n: [] for n in nodes}

    def add(self, node: str, cpus: float, memory: int, count: int = 1) -> None:
        if node not in self.nodes:
            return
        self.cpus[node] += cpus
        self.memory[node] += memory
        self.count[node] += count
        self.version[node] += 1
        for heap in self.member_of[node]:
            heapq.heappush(heap, self._entry(node))

    def _entry(self, node: str) -> tuple[Any, ...]:
        info = self.nodes[node]
        load = 0.0
        if info.cpus:
            load = max(load, self.cpus[node] / info.cpus)
        if info.memory:
            load = max(load, self.memory[node] / info.memory)
        return (round(load, 9), self.count[node], _tiebreak(node), node, self.version[node])

    def is_eligible(self, node: NodeInfo) -> bool:
        return not node.cordoned and self.health.get(node.name, UNKNOWN).alive

    def fits(self, node: str, svc: ServiceSpec) -> bool:
        info = self.nodes[node]
        if info.cpus is not None and self.cpus[node] + svc.cpus > info.cpus + _EPS:
            return False
        return info.memory is None or self.memory[node] + svc.memory <= info.memory

    def pool(self, selector: Mapping[str, str]) -> list[tuple[Any, ...]]:
        key = tuple(sorted(selector.items()))
        heap = self.pools.get(key)
        if heap is None:
            heap = []
            for node in self.nodes.values():
                if node.matches(selector) and self.is_eligible(node):
                    heap.append(self._entry(node.name))
                    self.member_of[node.name].append(heap)
            heapq.heapify(heap)
            self.pools[key] = heap
        return heap

    def pick(self, svc: ServiceSpec, exclude: set[str]) -> str | None:
        """The least loaded eligible node that fits ``svc`` and is not in ``exclude``."""
        heap = self.pool(svc.labels or {})
        skipped: list[tuple[Any, ...]] = []
        chosen: str | None = None
        while heap:
            entry = heapq.heappop(heap)
            node, version = entry[3], entry[4]
            if version != self.version[node]:
                continue  # stale: a newer entry for this node is in the heap
            if node in exclude or not self.fits(node, svc):
                skipped.append(entry)
                continue
            chosen = node
            heapq.heappush(heap, entry)  # re-pushed as stale once add() bumps the version
            break
        for entry in skipped:
            heapq.heappush(heap, entry)
        return chosen

    def why_not(self, svc: ServiceSpec, exclude: set[str], now: float) -> str:
        """Why no node can take a replica of ``svc`` (for the unassigned reason)."""
        sel = svc.selector_text()
        matching = [n for n in sorted(self.nodes) if self.nodes[n].matches(svc.labels or {})]
        if not matching:
            return f"no node matches {sel}"
        notes = []
        for name in matching:
            health = self.health.get(name, UNKNOWN)
            if self.nodes[name].cordoned:
                notes.append(f"{name} cordoned")
            elif not health.alive:
                notes.append(f"{name} offline" + offline_text(health, now))
            elif name in exclude:
                notes.append(f"{name} already runs a replica (spread)")
            elif not self.fits(name, svc):
                notes.append(f"{name} lacks capacity ({self._free(name)} free)")
        more = f" and {len(notes) - 5} more" if len(notes) > 5 else ""
        need = f"{svc.cpus:g} CPUs, {format_bytes(svc.memory)}"
        return f"no feasible node for {need} among {len(matching)} matching {sel}: " + (
            ", ".join(notes[:5]) + more
        )

    def _free(self, node: str) -> str:
        info = self.nodes[node]
        cpus = "∞" if info.cpus is None else f"{info.cpus - self.cpus[node]:g}"
        mem = "∞" if info.memory is None else format_bytes(info.memory - self.memory[node])
        return f"{cpus} CPUs, {mem}"


def offline_text(health: NodeHealth, now: float) -> str:
    return f" for {int(health.offline_for(now))} s" if health.offline_since is not None else ""
