"""The pure decision: desired state + actual state -> an ordered list of actions.

Called by the loop (and ``phrame node-agent --once``) on every pass; tested by asserting
the action lists it returns. It must never do I/O, never plan to stop, recreate or remove
its own container or another node's objects, and never remove anything unless the
manifest is complete.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import replace

from node_agent.models import (
    ENVIRONMENT,
    NODE,
    SERVICE,
    Action,
    ActualState,
    DesiredState,
    ObservedContainer,
    Op,
    Plan,
    Spec,
)
from schemas import Topics

_NEEDS_START = ("created", "exited")
_TOPICS = Topics()  # only its item-id check is used


def compute_plan(
    desired: DesiredState,
    actual: ActualState,
    *,
    node: str,
    own_container_id: str | None = None,
) -> Plan:
    """Return the actions that close the gap between ``desired`` and ``actual`` for ``node``."""
    complete = desired.is_complete  # on what was received: a handed-over container stays listed
    desired = wanted(desired, actual)
    errors: list[str] = []
    actual = _without_bad_names(actual, node, errors)
    mine = {n: c for n, c in actual.containers.items() if c.labels.get(NODE) == node}
    foreign = {n: c for n, c in actual.containers.items() if n not in mine}

    networks = [
        Action(Op.CREATE_NETWORK, name, "absent", spec)
        for name, spec in sorted(desired.networks.items())
        if name not in actual.networks
    ]
    for name, spec in sorted(desired.networks.items()):
        seen_net = actual.networks.get(name)
        if seen_net is None or seen_net.labels.get(NODE) != node:
            continue  # absent, or another node's on a shared daemon: present, never ours to change
        if seen_net.digest not in (None, spec["digest"]):
            # Recreating a network means detaching every container on it: left to a person.
            errors.append(
                f"network {name}: its spec changed; networks are not recreated automatically "
                "- remove it (its containers are then recreated) to apply the change"
            )
    items: list[Action] = []
    for name, spec in sorted(desired.containers.items()):
        if name in foreign:
            other = foreign[name].labels.get(NODE) or "?"
            errors.append(
                f"container {name}: the name is taken by node {other}'s container; "
                "not touched (fix the placement)"
            )
            continue
        action = _container_action(name, spec, mine.get(name), own_container_id, errors)
        if action is not None:
            items.append(action)
    for pid, spec in sorted(desired.processes.items()):
        seen = actual.processes.get(pid)
        deps = tuple(spec.get("depends_on") or ())
        if seen is None:
            items.append(Action(Op.START_PROCESS, pid, "absent", spec, deps))
        elif seen.digest != spec["digest"]:
            items.append(Action(Op.RESTART_PROCESS, pid, "digest changed", spec, deps))

    pulls = _pulls(a for a in items if a.op in (Op.CREATE, Op.RECREATE))
    pending: list[str] = []
    removals = _removals(desired, actual, mine, own_container_id, pending, node, complete)
    return Plan(
        actions=(*networks, *pulls, *order_by_dependencies(items), *removals),
        errors=tuple(errors),
        pending=tuple(pending),
    )


def _without_bad_names(actual: ActualState, node: str, errors: list[str]) -> ActualState:
    """Drop (and name in ``errors``) this node's managed objects whose name is no item id.

    Phrame never creates such names, so the object was labelled by hand: never touched.
    """
    bad = {
        kind: sorted(n for n, o in objects.items() if o.labels.get(NODE) == node and not _is_item_id(n))
        for kind, objects in (("container", actual.containers), ("network", actual.networks))
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
    name: str,
    spec: Spec,
    seen: ObservedContainer | None,
    own_id: str | None,
    errors: list[str],
) -> Action | None:
    deps = tuple(spec.get("depends_on") or ())
    if seen is None:
        return Action(Op.CREATE, name, "absent", spec, deps)
    if own_id and is_own_container(seen, own_id):
        if seen.digest != spec["digest"]:
            errors.append(f"container {name} is the agent itself; it never recreates itself")
        return None
    if seen.digest != spec["digest"]:
        return Action(Op.RECREATE, name, f"digest {seen.digest} -> {spec['digest']}", spec, deps)
    if seen.state == "dead":
        return Action(Op.RECREATE, name, "dead", spec, deps)
    if seen.state in _NEEDS_START:
        return Action(Op.START, name, seen.state, spec, deps)
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


def wanted(desired: DesiredState, actual: ActualState) -> DesiredState:
    """What the planner converges to: the effective desired state without the containers
    handed over to a stable process (``replaces``).

    Config-sync keeps publishing a replaced container (its service still exists); it is
    desired as usual - created, kept, repaired - until the process that replaces it is
    stable, and not desired while that lasts. Should the process stop being stable (it
    exited, restarts), the container is desired again, so the node is never left with
    neither. The reconciler and the loop use this too (dependencies, reports).
    """
    desired = desired.effective()  # with a manifest, an item it does not list is not desired
    targets = [(n, s.get("environment"), s.get("service")) for n, s in desired.containers.items()]
    handed = {
        name
        for name, pid in _replacements(desired, targets).items()
        if (proc := actual.processes.get(pid)) is not None and proc.is_stable
    }
    if not handed:
        return desired
    return replace(desired, containers={n: s for n, s in desired.containers.items() if n not in handed})


def replaced_by(desired: DesiredState, containers: Iterable[ObservedContainer]) -> dict[str, str]:
    """Container name -> id of the desired process that replaces it (``replaces``)."""
    targets = [(c.name, c.labels.get(ENVIRONMENT), c.labels.get(SERVICE)) for c in containers]
    return _replacements(desired, targets)


def _replacements(
    desired: DesiredState, targets: Iterable[tuple[str, str | None, str | None]]
) -> dict[str, str]:
    """Of (name, environment, service) ``targets``: name -> id of the process replacing it.

    An entry of ``replaces`` with a dot is an item id (what render publishes); without
    one it names a container service of the process's environment.
    """
    out: dict[str, str] = {}
    targets = list(targets)
    for pid, spec in desired.processes.items():
        env = spec["environment"]
        for entry in spec.get("replaces") or ():
            for name, c_env, c_service in targets:
                if "." in entry:
                    hit = name == entry or name.startswith(entry + ".")
                else:
                    hit = c_env == env and c_service == entry
                if hit:
                    out[name] = pid
    return out


def _removals(
    desired: DesiredState,
    actual: ActualState,
    mine: Mapping[str, ObservedContainer],
    own_id: str | None,
    pending: list[str],
    node: str,
    complete: bool,
) -> list[Action]:
    replaced = replaced_by(desired, mine.values())
    out: list[Action] = []
    for name, c in sorted(mine.items()):
        if is_own_container(c, own_id):
            continue
        if name in replaced:
            proc = actual.processes.get(replaced[name])
            # Until the process is stable both exist (the container is kept, even repaired): no gap.
            if proc is not None and proc.is_stable:
                out.append(Action(Op.REMOVE, name, f"replaced by process {replaced[name]}"))
            else:
                pending.append(f"container {name} waits for process {replaced[name]} to stay up")
        elif name in desired.containers:
            continue
        elif complete and not desired.in_manifest("containers", name):
            out.append(Action(Op.REMOVE, name, "not in the complete manifest"))
    if complete:
        out += [
            Action(Op.STOP_PROCESS, pid, "not in the complete manifest")
            for pid in sorted(actual.processes)
            if pid not in desired.processes and not desired.in_manifest("processes", pid)
        ]
        out += [
            Action(Op.REMOVE_NETWORK, name, "not in the complete manifest")
            for name, net in sorted(actual.networks.items())
            if net.labels.get(NODE) == node
            and name not in desired.networks
            and not desired.in_manifest("networks", name)
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
