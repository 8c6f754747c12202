"""The pure decision: desired state + actual state -> an ordered list of actions.

Called by the loop (and ``phrame node-agent --once``) on every pass; tested by asserting
the action lists it returns. It must never do I/O, never plan to stop, recreate or remove
its own container or another node's objects, and never remove anything unless the
manifest is complete.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import replace

from node_agent.handover import replaced_by, wanted
from node_agent.models import (
    NODE,
    Action,
    ActualState,
    DesiredState,
    ObservedContainer,
    Op,
    Plan,
    Spec,
)
from node_agent.naming import container_name, is_phrame_name, name_held
from node_agent.networks import network_actions
from schemas import Topics

_NEEDS_START = ("created", "exited")
_TOPICS = Topics()  # only its item-id check is used


def compute_plan(
    desired: DesiredState,
    actual: ActualState,
    *,
    node: str,
    own_container_id: str | None = None,
    shared_daemon: bool = False,
    refused: Mapping[str, str] | None = None,
) -> Plan:
    """Return the actions that close the gap between ``desired`` and ``actual`` for ``node``.

    This node's containers are found by their labels; ``shared_daemon`` only decides the
    name a new container gets (``naming.container_name``). ``refused`` (item id -> why) are
    the items the node policy does not allow: nothing is created, recreated or started for
    them nor for what depends on them, and what of them already exists is left as it is.
    """
    complete = desired.is_complete  # on what was received: a handed-over container stays listed
    desired = wanted(desired, actual)
    errors: list[str] = []
    actual = _without_bad_names(actual, node, errors)
    mine, extra = _mine(actual, node, shared_daemon)
    on_duplicate = {n.id for n in actual.duplicate_networks}
    items: list[Action] = []
    names: dict[str, str] = {}
    for item, spec in sorted(desired.containers.items()):
        name = container_name(item, node, shared_daemon=shared_daemon)
        seen = mine.get(item)
        holder = actual.containers.get(name)
        if seen is None and holder is not None:
            other = holder.labels.get(NODE) or "?"
            errors.append(name_held(item, name, other, shared_daemon=shared_daemon))
            continue
        names[item] = seen.name if seen is not None else name
        action = _container_action(item, spec, seen, name, own_container_id, errors, on_duplicate)
        if action is not None:
            items.append(action)
            names[item] = name if action.op in (Op.CREATE, Op.RECREATE) else names[item]
    for pid, spec in sorted(desired.processes.items()):
        seen_proc = actual.processes.get(pid)
        deps = tuple(spec.get("depends_on") or ())
        if seen_proc is None:
            items.append(Action(Op.START_PROCESS, pid, "absent", spec, deps))
        elif seen_proc.digest != spec["digest"]:
            items.append(Action(Op.RESTART_PROCESS, pid, "digest changed", spec, deps))

    held = _refused(items, refused or {})
    errors += sorted(held.values())
    items = [a for a in items if a.target not in held]
    pulls = _pulls(a for a in items if a.op in (Op.CREATE, Op.RECREATE))
    pending: list[str] = []
    removals = _removals(desired, actual, mine, extra, own_container_id, pending, complete)
    leaving = [a.ref for a in (*items, *removals) if a.op in (Op.REMOVE, Op.RECREATE) and a.ref]
    nets = network_actions(desired, actual, node=node, complete=complete, leaving=leaving)
    return Plan(
        actions=(
            *[a for a in nets.actions if a.op in (Op.CREATE_NETWORK, Op.REMOVE_DUPLICATE_NETWORK)],
            *pulls,
            *order_by_dependencies(items),
            *removals,
            *[a for a in nets.actions if a.op is Op.REMOVE_NETWORK],
        ),
        errors=tuple(errors + nets.errors),
        pending=tuple(pending + nets.pending),
        notes=tuple(nets.notes),
        names=names,
        refused=held,
    )


def _refused(items: list[Action], refused: Mapping[str, str]) -> dict[str, str]:
    """``refused`` (reported even when nothing was to be done: an item that runs from before
    the policy is left running, and said to be refused), and the items to act on that
    depend on one of them."""
    held = dict(refused)
    blocked = set(refused)
    while True:
        more = {
            a.target: f"{a.target} waits for {d}, which the node policy refuses"
            for a in items
            if a.target not in held
            for d in a.depends_on
            if d in blocked
        }
        if not more:
            return held
        held |= more
        blocked |= set(more)


def _mine(
    actual: ActualState, node: str, shared_daemon: bool
) -> tuple[dict[str, ObservedContainer], list[ObservedContainer]]:
    """This node's containers by item id (from their labels), and any second container of
    one item (e.g. left from before ``PHRAME_SHARED_DAEMON`` changed): the one with the
    current name, else a running one, else the first by name is the item's."""
    by_item: dict[str, list[ObservedContainer]] = {}
    for c in actual.containers.values():
        if c.labels.get(NODE) == node and c.item_id is not None:
            by_item.setdefault(c.item_id, []).append(c)
    mine: dict[str, ObservedContainer] = {}
    extra: list[ObservedContainer] = []
    for item, found in by_item.items():
        name = container_name(item, node, shared_daemon=shared_daemon)
        found.sort(key=lambda c: (c.name != name, c.state != "running", c.name))
        mine[item] = found[0]
        extra += found[1:]
    return mine, extra


def _without_bad_names(actual: ActualState, node: str, errors: list[str]) -> ActualState:
    """Drop (and name in ``errors``) this node's managed objects that phrame did not name:
    a container whose labels give no item id or whose name is not one phrame gives it, a
    network whose name is no item id. They were labelled by hand: never touched."""
    bad = {
        "container": sorted(
            n
            for n, c in actual.containers.items()
            if c.labels.get(NODE) == node and not (is_phrame_name(c, node) and _is_item_id(c.item_id or ""))
        ),
        "network": sorted(
            n for n, o in actual.networks.items() if o.labels.get(NODE) == node and not _is_item_id(n)
        ),
    }
    if not bad["container"] and not bad["network"]:
        return actual
    for kind, names in bad.items():
        errors += [f"managed {kind} {n!r}: the name is not an item id; not touched" for n in names]
    return replace(
        actual,
        containers={n: c for n, c in actual.containers.items() if n not in bad["container"]},
        networks={n: o for n, o in actual.networks.items() if n not in bad["network"]},
    )


def _is_item_id(name: str) -> bool:
    try:
        _TOPICS.actual_item("n", "containers", name)
    except ValueError:
        return False
    return True


def is_own_container(container: ObservedContainer, own_id: str | None) -> bool:
    """True when ``container`` is the one the agent runs in (``own_id`` may be a prefix)."""
    return bool(own_id) and container.id.startswith(own_id or "-")


def _container_action(
    item: str,
    spec: Spec,
    seen: ObservedContainer | None,
    name: str,
    own_id: str | None,
    errors: list[str],
    on_duplicate: set[str],
) -> Action | None:
    deps = tuple(spec.get("depends_on") or ())
    if seen is None:
        return Action(Op.CREATE, item, "absent", spec, deps, name=name)
    if own_id and is_own_container(seen, own_id):
        if seen.digest != spec["digest"]:
            errors.append(f"container {item} is the agent itself; it never recreates itself")
        return None
    if seen.digest != spec["digest"]:
        reason = f"digest {seen.digest} -> {spec['digest']}"
        return Action(Op.RECREATE, item, reason, spec, deps, ref=seen.id, name=name)
    if seen.state == "dead":
        return Action(Op.RECREATE, item, "dead", spec, deps, ref=seen.id, name=name)
    if on_duplicate & set(seen.networks.values()):  # the duplicate's creator waits for it to leave
        return Action(Op.RECREATE, item, "on a duplicate network", spec, deps, ref=seen.id, name=name)
    if seen.state in _NEEDS_START:
        return Action(Op.START, item, seen.state, spec, deps, ref=seen.id)
    return None


def _pulls(actions: Iterable[Action]) -> list[Action]:
    always: dict[str, bool] = {}
    for a in actions:
        assert a.spec is not None
        image = a.spec["image"]
        always[image] = always.get(image, False) or a.spec.get("pull") == "always"
    return [
        Action(Op.PULL_IMAGE, image, "always" if flag else "if missing", always=flag)
        for image, flag in sorted(always.items())
    ]


def _removals(
    desired: DesiredState,
    actual: ActualState,
    mine: Mapping[str, ObservedContainer],
    extra: list[ObservedContainer],
    own_id: str | None,
    pending: list[str],
    complete: bool,
) -> list[Action]:
    replaced = replaced_by(desired, mine.values())
    out: list[Action] = []
    for item, c in sorted(mine.items()):
        if is_own_container(c, own_id):
            continue
        if item in replaced:
            proc = actual.processes.get(replaced[item])
            # Until the process is stable both exist (the container is kept, even repaired): no gap.
            if proc is not None and proc.is_stable:
                out.append(Action(Op.REMOVE, item, f"replaced by process {replaced[item]}", ref=c.id))
            else:
                pending.append(f"container {item} waits for process {replaced[item]} to stay up")
        elif item in desired.containers:
            continue
        elif complete and not desired.in_manifest("containers", item):
            out.append(Action(Op.REMOVE, item, "not in the complete manifest", ref=c.id))
    if complete:
        out += [
            Action(Op.REMOVE, c.item_id or c.name, f"a second container of the item ({c.name})", ref=c.id)
            for c in sorted(extra, key=lambda c: c.name)
            if not is_own_container(c, own_id)
        ]
        out += [
            Action(Op.STOP_PROCESS, pid, "not in the complete manifest")
            for pid in sorted(actual.processes)
            if pid not in desired.processes and not desired.in_manifest("processes", pid)
        ]
    return out


def dependency_levels(actions: Iterable[Action]) -> list[list[Action]]:
    """Group actions so each depends only on actions of earlier groups.

    Dependencies on items that are not in ``actions`` count as satisfied; a cycle is broken
    by putting the remaining actions in one last group (validation rejects cycles upstream).
    """
    pending = {a.target: a for a in actions}
    levels: list[list[Action]] = []
    while pending:
        ready = [a for a in pending.values() if all(d not in pending or d == a.target for d in a.depends_on)]
        if not ready:
            ready = list(pending.values())
        ready.sort(key=lambda a: a.target)
        levels.append(ready)
        for a in ready:
            del pending[a.target]
    return levels


def order_by_dependencies(actions: Iterable[Action]) -> list[Action]:
    return [a for level in dependency_levels(actions) for a in level]
