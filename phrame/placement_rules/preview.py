"""Where placement would put a change's new or moved label-placed replicas, decided now.

config-sync (the merge request's plan note) and ``phrame plan`` call :func:`preview` on the
proposed tree: a ``replicas: 2 → 3`` change renders nothing for the third replica until
placement commits ``node.json``, so the review would show nothing at all without it. It runs
the very decision placement runs (:func:`phrame.placement_rules.decide.decide`), with liveness as the
caller knows it and no clock: a preview never moves a replica because its node is offline
(that is placement's grace period, not the change's doing), and it never writes anything.
"""

from __future__ import annotations

import math
from collections.abc import Collection
from dataclasses import dataclass

from phrame.config_repo import ConfigRepo
from phrame.placement_rules import inventory
from phrame.placement_rules.decide import decide
from phrame.placement_rules.models import NodeHealth


@dataclass(frozen=True)
class Placed:
    """One replica the change would place: ``target`` None when no node can take it (``cause``)."""

    environment: str
    replica: str
    source: str | None
    target: str | None
    cause: str


def preview(repo: ConfigRepo, *, offline: Collection[str] = ()) -> list[Placed]:
    """Every label-placed replica of ``repo`` (validated: only documents that passed their
    schema are read, as placement reads them) that placement would (re)assign now, given that
    the nodes in ``offline`` are offline (the rest alive). Replicas it would remove (scaled
    down, service gone) are left out: the rendered plan already shows those removals."""
    nodes = inventory.nodes_of(repo)
    health = {n: NodeHealth(alive=n not in offline) for n in nodes}
    out: list[Placed] = []
    for name, env in sorted(repo.environments.items()):
        services = inventory.services_of(env)
        if not any(s.is_label_placed for s in services):
            continue
        decision = decide(
            name,
            nodes=nodes,
            services=services,
            current=inventory.current_document(env),
            health=health,
            now=0.0,
            reschedule_after=math.inf,  # liveness moves are placement's own, not the change's
            reserved=inventory.reserved_elsewhere(repo, name),
        )
        if decision.held is not None:
            continue
        why_not = {f"{u.service}.{u.index}": u.reason for u in decision.unassigned}
        for m in decision.moves:
            if not m.is_removal:  # a replica moved off and then left unassigned says both
                cause = f"{m.cause}; {why_not.pop(m.replica)}" if m.replica in why_not else m.cause
                out.append(Placed(name, m.replica, m.source, m.target, cause))
        out += [Placed(name, replica, None, None, why) for replica, why in why_not.items()]
    return sorted(out, key=_order)


def _order(placed: Placed) -> tuple[str, str, int]:
    service, _, index = placed.replica.rpartition(".")
    return placed.environment, service, int(index)
