"""One reconcile pass: observe Docker and processes, plan, execute.

The loop calls :meth:`NodeReconciler.run_pass` on every trigger and ``--once`` calls it a
single time. It re-reads everything each pass (level-triggered), so a lost or repeated
trigger is harmless; it never decides anything itself (``plan.py`` does).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any, Protocol

from node_agent.errors import DockerError, printable
from node_agent.executor import Executor
from node_agent.handover import wanted
from node_agent.models import (
    ActionOutcome,
    ActualState,
    DesiredState,
    ObservedContainer,
    ObservedProcess,
    Plan,
    Spec,
)
from node_agent.networks import split_duplicates
from node_agent.plan import compute_plan
from node_agent.policy import item_violations
from node_agent.ports import ObservableRuntime
from node_agent.prefetch import PullSlots
from schemas.node_policy import NodePolicy

log = logging.getLogger(__name__)


class ObservableProcesses(Protocol):
    """What the reconciler needs of the agent's processes (``processes.ProcessSupervisor``)."""

    def check(self) -> dict[str, ObservedProcess]: ...
    def start(self, spec: Spec) -> None: ...
    def stop(self, item_id: str) -> None: ...


@dataclass(frozen=True)
class PassResult:
    plan: Plan
    outcomes: tuple[ActionOutcome, ...]
    actual: ActualState  # as observed before acting
    errors: tuple[str, ...] = field(default=())

    @property
    def converged(self) -> bool:
        return not self.errors and not self.plan.pending and all(o.ok for o in self.outcomes)

    def to_dict(self) -> dict[str, Any]:
        return {
            "plan": [{"op": a.op.value, "target": a.target, "reason": a.reason} for a in self.plan.actions],
            "results": [
                {"op": o.action.op.value, "target": o.action.target, "ok": o.ok, "error": o.error}
                for o in self.outcomes
            ],
            "errors": list(self.errors),
            "converged": self.converged,
        }


class NodeReconciler:
    def __init__(
        self,
        node: str,
        docker: ObservableRuntime,
        *,
        supervisor: ObservableProcesses | None = None,
        parallelism: int = 4,
        own_container_id: str | None = None,
        ready_timeout: float = 120.0,
        shared_daemon: bool = False,
        policy: NodePolicy | None = None,
        pull_slots: PullSlots | None = None,
    ) -> None:
        """``policy``: the node's policy (``AgentSettings.policy``); None checks nothing, for
        tests and benchmarks of other things: every entry point of the agent passes one."""
        self.node = node
        self.policy = policy
        self.shared_daemon = shared_daemon  # container names carry the node (naming.py)
        self._said: set[str] = set()  # notes already logged
        self.docker = docker
        self.supervisor = supervisor
        self.own_container_id = own_container_id
        self.executor = Executor(
            docker, supervisor, parallelism=parallelism, ready_timeout=ready_timeout, pull_slots=pull_slots
        )

    def observe(self, *, networks_from: ActualState | None = None) -> ActualState:
        """Two Docker list calls (containers, networks) and a local process check;
        ``networks_from``: the networks as that observation saw them, not listed again (a
        pass that ran no network action looks again at its containers and processes only)."""
        try:
            containers = {c.name: c for c in self.docker.list_containers()}
            if networks_from is not None:
                networks, duplicates = dict(networks_from.networks), networks_from.duplicate_networks
            else:
                networks, duplicates = split_duplicates(self.docker.list_networks())
        except DockerError:
            if self.docker.unavailable is None:
                raise
            # No daemon on this host: nothing of ours can run there, so the plan only
            # creates (each container then fails and is reported) and never removes.
            containers, networks, duplicates = {}, {}, ()
        processes = self.supervisor.check() if self.supervisor else {}
        return ActualState(containers, networks, processes, duplicates)

    def refused(self, desired: DesiredState) -> dict[str, str]:
        """The desired containers and processes the node policy does not allow: item -> why."""
        if self.policy is None:
            return {}
        out: dict[str, str] = {}
        for spec in (*desired.containers.values(), *desired.processes.values()):
            found = item_violations(spec, self.policy, node=self.node)
            if found:  # a hostile spec's thousand volumes make no megabyte status line
                out[str(spec["name"])] = printable("; ".join(found))
        return out

    def run_pass(self, desired: DesiredState, *, dry_run: bool = False) -> PassResult:
        actual = self.observe()
        plan = compute_plan(
            desired,
            actual,
            node=self.node,
            own_container_id=self.own_container_id,
            shared_daemon=self.shared_daemon,
            refused=self.refused(desired),
        )
        for error in plan.errors:
            log.warning("node %s: %s", self.node, error)
        for note in set(plan.notes) - self._said:  # once while it lasts, not every pass
            log.info("node %s: %s", self.node, note)
        self._said = set(plan.notes)
        if dry_run:
            outcomes: tuple[ActionOutcome, ...] = ()
        else:  # dependants wait for every desired container of this node, not only changed ones
            containers = wanted(desired, actual).containers
            ready = [i for i in containers if _is_ready(actual.containers.get(plan.names.get(i, i)))]
            outcomes = tuple(self.executor.apply(plan, containers=containers, ready=ready))
        errors = (*plan.errors, *(f"{o.action.describe()}: {o.error}" for o in outcomes if o.error))
        return PassResult(plan, outcomes, actual, tuple(errors))


def _is_ready(c: ObservedContainer | None) -> bool:
    """Running, and healthy if it has a healthcheck, as the container list says."""
    return c is not None and c.state == "running" and c.health in (None, "healthy")
