"""``replaces``: a container handed over to a host process, and when it is no longer wanted.

Pure; the planner, the reconciler and the loop call :func:`wanted`, the planner
:func:`replaced_by`. It never decides a removal itself: it says which containers a stable
process replaces, so there is never a window with neither running.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace

from node_agent.models import ENVIRONMENT, SERVICE, ActualState, DesiredState, ObservedContainer


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
    """Item id (from the labels) -> id of the desired process that replaces it (``replaces``)."""
    targets = [(c.item_id or c.name, c.labels.get(ENVIRONMENT), c.labels.get(SERVICE)) for c in containers]
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
