"""The values the placement decision reads and returns: nodes, services, liveness, moves.

Frozen dataclasses built by the loop from the config repo and the actual plane and handed
to :func:`phrame.placement_rules.decide.decide`; nothing here does I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

SCHEMA = "phrame.placement/v1"


@dataclass(frozen=True)
class NodeInfo:
    """One inventory entry. ``cpus``/``memory`` ``None``: that dimension is not limited."""

    name: str
    labels: Mapping[str, str] = field(default_factory=dict)
    cpus: float | None = None
    memory: int | None = None
    cordoned: bool = False

    def matches(self, selector: Mapping[str, str]) -> bool:
        return all(self.labels.get(k) == v for k, v in selector.items())


@dataclass(frozen=True)
class ServiceSpec:
    """A service of the environment. ``pin`` set: pinned (only reserves capacity)."""

    name: str
    replicas: int = 1
    labels: Mapping[str, str] | None = None
    spread: bool = False
    pin: str | None = None
    cpus: float = 0.0
    memory: int = 0

    @property
    def is_label_placed(self) -> bool:
        return self.pin is None and self.labels is not None

    def selector_text(self) -> str:
        return ",".join(f"{k}={v}" for k, v in sorted((self.labels or {}).items())) or "any node"


@dataclass(frozen=True)
class NodeHealth:
    """Liveness of one node at the decision's clock value.

    ``offline_since`` is the moment the node was declared offline (``None`` while alive)."""

    alive: bool
    offline_since: float | None = None

    def offline_for(self, now: float) -> float:
        return 0.0 if self.alive or self.offline_since is None else max(0.0, now - self.offline_since)


@dataclass(frozen=True)
class Usage:
    """Reserved resources on one node by replicas outside this decision (other environments)."""

    cpus: float = 0.0
    memory: int = 0


@dataclass(frozen=True)
class Move:
    """One replica changing node (``None`` = unassigned, or a removed replica)."""

    service: str
    index: int
    source: str | None
    target: str | None
    cause: str
    is_removal: bool = False  # the replica itself is gone (scaled down, service removed)

    @property
    def replica(self) -> str:
        return f"{self.service}.{self.index}"

    def describe(self) -> str:
        """``edge-02 offline for 75 s: mixer.1 edge-02 → edge-03``."""
        src = self.source or "(unassigned)"
        dst = "(removed)" if self.is_removal else (self.target or "(unassigned)")
        return f"{self.cause}: {self.replica} {src} → {dst}"


@dataclass(frozen=True)
class Pending:
    """A replica left on an offline node that will move once the grace period is over."""

    service: str
    index: int
    node: str
    offline_for_s: float
    moves_in_s: float

    def to_dict(self) -> dict[str, Any]:
        return {
            "replica": f"{self.service}.{self.index}",
            "node": self.node,
            "offline_for_s": round(self.offline_for_s, 1),
            "moves_in_s": round(self.moves_in_s, 1),
        }


@dataclass(frozen=True)
class Unassigned:
    service: str
    index: int
    reason: str

    def to_dict(self) -> dict[str, Any]:
        return {"replica": f"{self.service}.{self.index}", "reason": self.reason}


@dataclass(frozen=True)
class Decision:
    """The new ``node.json`` document and what changed relative to the current one."""

    doc: dict[str, Any]
    moves: tuple[Move, ...] = ()
    pending: tuple[Pending, ...] = ()
    unassigned: tuple[Unassigned, ...] = ()
    is_changed: bool = False
    held: str | None = None  # why nothing was decided at all (the current node.json is kept)

    def commit_message(self, environment: str) -> str:
        """First line: a summary; then one line per move, saying what moved and why."""
        if not self.moves:
            return f"placement {environment}: update node.json\n"
        n = len(self.moves)
        head = f"placement {environment}: {self.moves[0].describe()}"
        if n > 1:
            head = f"placement {environment}: {n} replica moves"
        body = "\n".join(m.describe() for m in self.moves)
        return f"{head}\n\n{body}\n"
