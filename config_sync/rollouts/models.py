"""The values of a staged rollout: a replica's view, what its node reports, the rollout's state.

:mod:`config_sync.rollouts.waves` decides on them; :mod:`config_sync.rollouts.gate` builds them from
the rendering, the published plane and the actual plane, and retains
:class:`RolloutState` at ``phrame/desired/environments/<env>/rollouts/<service>``
(:meth:`RolloutState.to_doc` / :func:`state_from_doc`; schema ``desired-rollout``).
No I/O; a document that does not read as a state is ``None``, never an exception.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from phrame.actual.health import Reason  # the one shape of a reason: node, replica, why
from phrame.config_repo.update_policy import UpdatePolicy, policy_from

STATES = ("progressing", "waiting-promotion", "paused", "rolled-back", "complete")
ACTIVE = ("progressing", "waiting-promotion")  # re-evaluated on every change of the actual plane


@dataclass(frozen=True)
class Observed:
    """A replica as its node reports it (``actual/.../containers/<id>``), plus since when
    config-sync has seen it healthy on its current digest (``None``: not healthy now),
    running on it (``running_since``, the replica's start; ``None``: never seen running) and
    in its present state on it (``state_since``); ``error``: what its node could not do."""

    digest: str | None = None
    state: str | None = None
    health: str | None = None
    restart_count: int | None = None
    healthy_since: float | None = None
    started_at: str | float | None = None  # the node's (a new value: the container restarted)
    running_since: float | None = None
    state_since: float | None = None
    error: str | None = None


@dataclass(frozen=True)
class ReplicaView:
    """One replica of the service: what is published for it, what the commit renders."""

    item: str  # the item id, ``<env>.<service>.<replica>``
    node: str
    old: str | None  # digest published now; None: not published (a new replica)
    new: str  # digest rendered at the commit
    actual: Observed | None = None
    old_commit: str | None = None  # the ``commit`` of the published item (where its spec came from)
    image: str | None = None  # the image the new spec runs
    old_image: str | None = None  # the image of the published item
    # how far its node is pulling ``image`` ahead of the wave (its status's ``prefetch``):
    # ``pulled``, ``pulling``, ``failed`` (``pull_error`` says why), ``asked`` (not reported
    # yet); None: its node does not pull ahead (an older agent), nothing to wait for
    pull: str | None = None
    pull_error: str | None = None

    @property
    def needs_pull(self) -> bool:
        """Its wave replaces an image by another one its node reports pulling ahead."""
        return self.old is not None and self.image is not None and self.image != self.old_image

    @property
    def image_ready(self) -> bool:
        """Its wave may stop its old replica: its node has the new image (or cannot say)."""
        return not self.needs_pull or self.pull in (None, "pulled")


@dataclass(frozen=True)
class RolloutState:
    """A rollout as retained: the replicas it changes in wave order and their target digests,
    when each was released (wall clock) and what it ran before (for a rollback)."""

    environment: str
    service: str
    commit: str
    items: tuple[str, ...]
    target: Mapping[str, str]  # item -> digest it rolls out
    state: str = "progressing"
    wave: int = 0  # waves released so far
    waves: int = 0
    done: int = 0  # replicas released and healthy
    promoted: bool = False
    released_at: Mapping[str, float] = field(default_factory=dict)
    previous: Mapping[str, Mapping[str, str]] = field(default_factory=dict)  # item -> {commit, digest}
    nodes: Mapping[str, str] = field(default_factory=dict)  # item -> node
    reasons: tuple[Reason, ...] = ()
    # the next wave waits for its image on these (node, replica, image and pull state)
    pulling: tuple[Reason, ...] = ()
    started_at: float = 0.0
    updated_at: float = 0.0
    # the ``update:`` policy it was last planned with (None: read back from a document
    # written before the state recorded it)
    update: UpdatePolicy | None = None

    @property
    def total(self) -> int:
        return len(self.items)

    @property
    def is_active(self) -> bool:
        return self.state in ACTIVE

    def released(self) -> tuple[str, ...]:
        """The released replicas: always a prefix of ``items``."""
        return tuple(i for i in self.items if i in self.released_at)

    def description(self) -> str:
        """One line for GitLab's ``phrame/deploy`` and logs, e.g. ``mixer: wave 2/4 (1/4 healthy)``."""
        text = f"{self.service}: wave {self.wave}/{self.waves} ({self.done}/{self.total} healthy)"
        if self.pulling and self.state == "progressing":
            head = self.pulling[0]
            text += (
                f", wave {self.wave + 1} waits for {len(self.pulling)} image pull(s)"
                f" ({head.node} {head.replica}: {head.reason})"
            )
        if self.state == "waiting-promotion":
            text += f", waiting for promotion (phrame promote {self.environment} {self.service})"
        elif self.state in ("paused", "rolled-back"):
            first = self.reasons[0] if self.reasons else None
            why = f": {first.node} {first.replica}: {first.reason}" if first else ""
            text = f"{self.service}: {self.state} at wave {self.wave}/{self.waves}{why}"
        elif self.state == "complete":
            text = f"{self.service}: complete, {self.total} replica(s) in {self.waves} wave(s)"
        return text

    def to_doc(self) -> dict[str, Any]:
        return {
            "environment": self.environment,
            "service": self.service,
            "commit": self.commit,
            "state": self.state,
            "wave": self.wave,
            "waves": self.waves,
            "done": self.done,
            "total": self.total,
            "promoted": self.promoted,
            "replicas": [
                {
                    "replica": i,
                    "node": self.nodes.get(i),
                    "digest": self.target[i],
                    "released_at": self.released_at.get(i),
                    "previous": dict(self.previous[i]) if i in self.previous else None,
                }
                for i in self.items
            ],
            "reasons": [r.to_doc() for r in self.reasons],
            **({"pulling": [r.to_doc() for r in self.pulling]} if self.pulling else {}),
            "description": self.description(),
            "started_at": self.started_at,
            "updated_at": self.updated_at,
            **({"update": policy_doc(self.update)} if self.update is not None else {}),
        }


def policy_doc(policy: UpdatePolicy) -> dict[str, Any]:
    """An ``update:`` policy as the retained state records it (the service's keys)."""
    return {
        "max_parallel": policy.max_parallel,
        "canary": policy.canary,
        "min_healthy_s": policy.min_healthy_s,
        "healthy_deadline_s": policy.healthy_deadline_s,
        "on_failure": policy.on_failure,
    }


def state_from_doc(doc: Mapping[str, Any] | None) -> RolloutState | None:
    """The retained document read back (after a restart); ``None`` when it is not one."""
    if not isinstance(doc, Mapping):
        return None
    try:
        replicas = list(doc["replicas"])
        items = tuple(str(r["replica"]) for r in replicas)
        state = str(doc["state"])
        if state not in STATES or len(set(items)) != len(items):
            return None
        return RolloutState(
            environment=str(doc["environment"]),
            service=str(doc["service"]),
            commit=str(doc["commit"]),
            items=items,
            target={str(r["replica"]): str(r["digest"]) for r in replicas},
            state=state,
            wave=int(doc.get("wave", 0)),
            waves=int(doc.get("waves", 0)),
            done=int(doc.get("done", 0)),
            promoted=bool(doc.get("promoted", False)),
            released_at={
                str(r["replica"]): float(r["released_at"])
                for r in replicas
                if r.get("released_at") is not None
            },
            previous={
                str(r["replica"]): {
                    "commit": str(r["previous"]["commit"]),
                    "digest": str(r["previous"]["digest"]),
                }
                for r in replicas
                if isinstance(r.get("previous"), Mapping)
            },
            nodes={str(r["replica"]): str(r["node"]) for r in replicas if r.get("node")},
            reasons=tuple(
                Reason(str(r["node"]), str(r["replica"]), str(r["reason"])) for r in doc.get("reasons", [])
            ),
            pulling=tuple(
                Reason(str(r["node"]), str(r["replica"]), str(r["reason"])) for r in doc.get("pulling", [])
            ),
            started_at=float(doc.get("started_at", 0.0)),
            updated_at=float(doc.get("updated_at", 0.0)),
            update=policy_from(doc["update"]) if isinstance(doc.get("update"), Mapping) else None,
        )
    except (KeyError, TypeError, ValueError):
        return None
