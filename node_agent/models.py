"""The agent's value types: what is desired, what Docker and the host have, what to do.

Frozen dataclasses shared by the pure planner (``plan.py``), the adapters and the loop.
Nothing here performs I/O; specs are the validated desired-plane payloads, kept as dicts.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Any, Protocol

Spec = Mapping[str, Any]


class Clock(Protocol):
    """A wall clock: seconds since the epoch (``time.time`` in production; a test hands in
    another, e.g. one ten minutes behind). Never used for timers or backoffs."""

    def __call__(self) -> float: ...


# Docker labels (docs/architecture/contracts.md).
MANAGED = "io.phrame.managed"
NODE = "io.phrame.node"
ENVIRONMENT = "io.phrame.environment"
SERVICE = "io.phrame.service"
REPLICA = "io.phrame.replica"
DIGEST = "io.phrame.digest"
COMMIT = "io.phrame.commit"
NETWORK = "io.phrame.network"
# on containers: the StopTimeout (whole seconds) given at creation, "" for none of its own
STOP_TIMEOUT = "io.phrame.stop-timeout"


@dataclass(frozen=True)
class Manifest:
    generation: int
    commit: str
    items: Mapping[str, str]  # "containers/<id>" -> digest


@dataclass(frozen=True)
class DesiredState:
    """Everything received for one node. ``manifest`` None means *unknown*, not empty."""

    containers: Mapping[str, Spec] = field(default_factory=dict)
    networks: Mapping[str, Spec] = field(default_factory=dict)
    processes: Mapping[str, Spec] = field(default_factory=dict)
    manifest: Manifest | None = None

    def kind(self, kind: str) -> Mapping[str, Spec]:
        return {"containers": self.containers, "networks": self.networks}.get(kind, self.processes)

    @property
    def is_complete(self) -> bool:
        """True when every item of the manifest was received with the manifest's digest."""
        if self.manifest is None:
            return False
        for key, want in self.manifest.items.items():
            kind, _, item_id = key.partition("/")
            spec = self.kind(kind).get(item_id)
            if spec is None or spec.get("digest") != want:
                return False
        return True

    def in_manifest(self, kind: str, item_id: str) -> bool:
        return self.manifest is not None and f"{kind}/{item_id}" in self.manifest.items

    def effective(self) -> DesiredState:
        """What is desired: with a manifest, only the received items it lists.

        An item received but not listed (cleared while the agent was away, or published
        ahead of the manifest that will list it) is not desired: it waits for a manifest.
        Without a manifest every received item counts (unknown: create, remove nothing).
        """
        if self.manifest is None:
            return self
        listed = self.manifest.items
        return replace(
            self,
            containers={k: v for k, v in self.containers.items() if f"containers/{k}" in listed},
            networks={k: v for k, v in self.networks.items() if f"networks/{k}" in listed},
            processes={k: v for k, v in self.processes.items() if f"processes/{k}" in listed},
        )


@dataclass(frozen=True)
class ObservedContainer:
    id: str
    name: str
    state: str  # created | running | paused | restarting | exited | dead | removing
    labels: Mapping[str, str] = field(default_factory=dict)
    image: str | None = None
    image_id: str | None = None
    health: str | None = None  # starting | healthy | unhealthy | None (no healthcheck)
    exit_code: int | None = None
    # network name -> id it is attached to ("" until the container first started)
    networks: Mapping[str, str] = field(default_factory=dict)

    @property
    def digest(self) -> str | None:
        return self.labels.get(DIGEST)

    @property
    def item_id(self) -> str | None:
        """``<env>.<service>.<replica>`` from its labels (never from its name, which may
        carry the node: ``PHRAME_SHARED_DAEMON``); None when a label is missing."""
        parts = [self.labels.get(k) for k in (ENVIRONMENT, SERVICE, REPLICA)]
        return ".".join(p for p in parts if p) if all(parts) else None


@dataclass(frozen=True)
class ObservedNetwork:
    id: str
    name: str
    labels: Mapping[str, str] = field(default_factory=dict)
    created: str = ""  # Docker's RFC 3339 time: orders same-named networks (``networks.py``)

    @property
    def digest(self) -> str | None:
        return self.labels.get(DIGEST)


@dataclass(frozen=True)
class ObservedProcess:
    item_id: str
    pid: int | None
    state: str  # running | exited | backoff
    digest: str | None
    started_at: float | None = None
    restart_count: int = 0
    exit_code: int | None = None
    is_stable: bool = False  # up at two consecutive checks and for at least STABLE_AFTER_S
    error: str | None = None


@dataclass(frozen=True)
class ActualState:
    containers: Mapping[str, ObservedContainer] = field(default_factory=dict)  # by name
    networks: Mapping[str, ObservedNetwork] = field(default_factory=dict)  # by name: the winner
    processes: Mapping[str, ObservedProcess] = field(default_factory=dict)
    # same-named managed networks that lost to the one in ``networks`` (a creation race)
    duplicate_networks: tuple[ObservedNetwork, ...] = ()


class Op(StrEnum):
    CREATE_NETWORK = "create_network"
    REMOVE_DUPLICATE_NETWORK = "remove_duplicate_network"  # before containers start on the name
    PULL_IMAGE = "pull_image"
    CREATE = "create"  # create + start
    START = "start"
    RECREATE = "recreate"
    START_PROCESS = "start_process"
    RESTART_PROCESS = "restart_process"
    REMOVE = "remove"
    STOP_PROCESS = "stop_process"
    REMOVE_NETWORK = "remove_network"


# the actions that change the networks a pass observed (nothing else changes their listing)
NETWORK_OPS = (Op.CREATE_NETWORK, Op.REMOVE_DUPLICATE_NETWORK, Op.REMOVE_NETWORK)


@dataclass(frozen=True)
class Action:
    op: Op
    target: str  # item id, network name or image reference
    reason: str = ""
    spec: Spec | None = field(default=None, compare=False, repr=False)
    depends_on: tuple[str, ...] = ()
    always: bool = False  # PULL_IMAGE: pull even when present
    ref: str | None = None  # the Docker object acted on (container or network id), if it exists
    name: str | None = field(default=None, compare=False)  # CREATE, RECREATE: the container's name

    def describe(self) -> str:
        return f"{self.op.value} {self.target}" + (f" ({self.reason})" if self.reason else "")


@dataclass(frozen=True)
class Plan:
    actions: tuple[Action, ...] = ()
    errors: tuple[str, ...] = ()  # things the planner refuses to do, said clearly
    # changes deliberately left for a later pass (a replaced container kept until its
    # process is stable): the node is not converged while any is pending
    pending: tuple[str, ...] = ()
    # things deliberately left alone that do not stop convergence (said once, at info)
    notes: tuple[str, ...] = ()
    # item id -> Docker name of this node's desired containers (dependency waits)
    names: Mapping[str, str] = field(default_factory=dict)
    # item id -> why the node policy keeps it from being created or started (also in errors)
    refused: Mapping[str, str] = field(default_factory=dict)

    @property
    def is_empty(self) -> bool:
        return not self.actions


@dataclass(frozen=True)
class ActionOutcome:
    action: Action
    error: str | None = None
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return self.error is None
