"""Networks on a daemon that several nodes' agents may share: who wins a name, who removes.

Pure. ``reconcile.observe`` and ``docker_port.create_network`` group what Docker lists with
:func:`split_duplicates`; ``plan.compute_plan`` calls :func:`network_actions`. Docker has
no create-if-absent (``check_duplicate`` races), so two agents can both create
``<env>.<net>``, and Docker then refuses every container start on that name as ambiguous.
Every agent agrees on one winner (oldest ``Created``, then lowest id); only a duplicate's
own creator removes it. It never plans to remove another node's network, nor one that a
container uses (Docker also refuses while endpoints are attached).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime

from node_agent.models import NODE, Action, ActualState, DesiredState, ObservedNetwork, Op

_TIME = re.compile(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d+))?(Z|[+-]\d\d:\d\d)?")


def created_key(net: ObservedNetwork) -> tuple[int, int, str]:
    """(seconds, nanoseconds, id): Docker trims the fraction's trailing zeros, so its time
    strings do not sort as text; an unparsable time sorts last (it never wins by it)."""
    match = _TIME.fullmatch(net.created.strip())
    if not match:
        return (2**62, 0, net.id)
    base, fraction, zone = match.groups()
    zone = "+00:00" if zone in (None, "Z") else zone
    seconds = int(datetime.fromisoformat(base + zone).timestamp())
    return (seconds, int((fraction or "0")[:9].ljust(9, "0")), net.id)


def split_duplicates(
    networks: Iterable[ObservedNetwork],
) -> tuple[dict[str, ObservedNetwork], tuple[ObservedNetwork, ...]]:
    """Name -> the winner of each name, and every same-named network that lost to one."""
    winners: dict[str, ObservedNetwork] = {}
    losers: list[ObservedNetwork] = []
    for net in sorted(networks, key=created_key):
        if net.name in winners:
            losers.append(net)
        else:
            winners[net.name] = net
    return winners, tuple(losers)


@dataclass
class NetworkDecision:
    actions: list[Action] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    pending: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def users(actual: ActualState, net: ObservedNetwork, *, leaving: Iterable[str] = ()) -> dict[str, str]:
    """Container name -> node of every listed container attached to ``net``, by id (or by
    name for the winner: a container never started has no network id yet), except the
    container ids in ``leaving`` (removed earlier in the same pass)."""
    gone = set(leaving)
    winner = actual.networks.get(net.name)
    by_name = winner is not None and winner.id == net.id
    return {
        c.name: c.labels.get(NODE) or "?"
        for c in actual.containers.values()
        if c.id not in gone
        and (net.id in c.networks.values() or (by_name and c.networks.get(net.name) == ""))
    }


def _who(found: Mapping[str, str]) -> str:
    nodes = sorted(set(found.values()))
    return ", ".join(f"node {n}" for n in nodes)


def network_actions(
    desired: DesiredState, actual: ActualState, *, node: str, complete: bool, leaving: Iterable[str]
) -> NetworkDecision:
    """Creations and removals of this node's duplicates (run before any container), then,
    against a complete manifest, removals of its networks no longer desired (run last);
    ``leaving`` are container ids this pass removes before that."""
    out = NetworkDecision()
    leaving = set(leaving)
    for name, spec in sorted(desired.networks.items()):
        seen = actual.networks.get(name)
        if seen is None:
            out.actions.append(Action(Op.CREATE_NETWORK, name, "absent", spec))
        elif seen.labels.get(NODE) == node and seen.digest not in (None, spec["digest"]):
            # Recreating a network means detaching every container on it: left to a person.
            out.errors.append(
                f"network {name}: its spec changed; networks are not recreated automatically "
                "- remove it (its containers are then recreated) to apply the change"
            )
    for dup in actual.duplicate_networks:
        winner = actual.networks[dup.name]
        owner = dup.labels.get(NODE) or "?"
        on_it = users(actual, dup)  # removed before containers are: none is leaving yet
        if owner != node:
            if dup.name in desired.networks:
                out.pending.append(
                    f"network {dup.name}: node {owner} created a second network of this name "
                    f"({dup.id[:12]}); Docker refuses to start containers on an ambiguous name "
                    f"until node {owner}'s agent removes it (or a person: docker network rm {dup.id[:12]})"
                )
        elif on_it:
            out.pending.append(
                f"network {dup.name}: this node's duplicate {dup.id[:12]} is removed once "
                f"{_who(on_it)}'s containers on it ({', '.join(sorted(on_it))}) have moved"
            )
        else:
            reason = f"duplicate of {winner.id[:12]}, created first"
            out.actions.append(Action(Op.REMOVE_DUPLICATE_NETWORK, dup.name, reason, ref=dup.id))
    if not complete:
        return out
    for name, net in sorted(actual.networks.items()):
        if net.labels.get(NODE) != node or name in desired.networks or desired.in_manifest("networks", name):
            continue
        on_it = users(actual, net, leaving=leaving)
        if on_it:  # another node's (or a person's) container: not this node's to break
            out.notes.append(
                f"network {name}: no longer desired, left while {_who(on_it)}'s containers use "
                f"it ({', '.join(sorted(on_it))}); removed once it is free"
            )
        else:
            out.actions.append(Action(Op.REMOVE_NETWORK, name, "not in the complete manifest", ref=net.id))
    return out
