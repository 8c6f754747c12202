"""Running a plan: networks, then images, then items in dependency order, then removals.

The loop and ``phrame node-agent --once`` call :meth:`Executor.apply`. Independent actions
run in parallel (at most ``parallelism`` at a time); an item whose dependency failed is
skipped with that reason, and any other failure stays confined to its own item.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Collection, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Protocol

from node_agent.errors import AgentError, NetworkInUse
from node_agent.models import Action, ActionOutcome, Op, Plan, Spec
from node_agent.plan import dependency_levels
from node_agent.ports import ContainerRuntime
from node_agent.prefetch import PullSlots

log = logging.getLogger(__name__)

_CONTAINER_OPS = (Op.CREATE, Op.RECREATE, Op.START)
_ITEM_OPS = (*_CONTAINER_OPS, Op.START_PROCESS, Op.RESTART_PROCESS)


class ProcessRuntime(Protocol):
    def start(self, spec: Spec) -> None: ...
    def stop(self, item_id: str) -> None: ...


class Executor:
    def __init__(
        self,
        docker: ContainerRuntime,
        processes: ProcessRuntime | None = None,
        *,
        parallelism: int = 4,
        ready_timeout: float = 120.0,
        pull_slots: PullSlots | None = None,
    ) -> None:
        """``pull_slots``: the node's bound on pulls at a time, shared with its pulls ahead
        of a wave (``node_agent.prefetch``); None: ``parallelism`` bounds them."""
        self.docker = docker
        self.pull_slots = pull_slots
        self.processes = processes
        self.parallelism = max(1, parallelism)
        self.ready_timeout = ready_timeout

    def apply(
        self, plan: Plan, *, containers: Collection[str] = (), ready: Collection[str] = ()
    ) -> list[ActionOutcome]:
        """Execute ``plan``; return one outcome per action, in the plan's order.

        ``containers`` names this node's desired containers: an item depending on one
        waits until it runs (and is healthy, with a healthcheck), acted on in this pass
        or not; ``ready``, those of them the pass's container list showed running (and
        healthy), is not asked again unless this pass acted on it.
        """
        by_op = {op: [a for a in plan.actions if a.op is op] for op in Op}
        results: dict[Action, ActionOutcome] = {}
        with ThreadPoolExecutor(self.parallelism, thread_name_prefix="agent-exec") as pool:

            def run(actions: Iterable[Action], fn: Callable[[Action], None]) -> None:
                for outcome in pool.map(lambda a: _timed(a, fn), list(actions)):
                    results[outcome.action] = outcome

            run(by_op[Op.CREATE_NETWORK], lambda a: self.docker.create_network(_spec(a)))
            run(by_op[Op.REMOVE_DUPLICATE_NETWORK], self._remove_network)
            run(by_op[Op.PULL_IMAGE], self._pull)
            failed_images = {a.target: results[a].error for a in by_op[Op.PULL_IMAGE] if results[a].error}
            items = [a for a in plan.actions if a.op in _ITEM_OPS]
            for level in dependency_levels(items):
                run(level, lambda a: self._item(a, results, failed_images, containers, ready, plan.names))
            run(by_op[Op.REMOVE], lambda a: self.docker.remove_container(a.ref or a.target))
            run(by_op[Op.STOP_PROCESS], lambda a: self._process_runtime().stop(a.target))
            run(by_op[Op.REMOVE_NETWORK], self._remove_network)
        outcomes = [results[a] for a in plan.actions]
        for o in outcomes:
            if o.error:
                log.warning("%s failed: %s", o.action.describe(), o.error)
        return outcomes

    def _pull(self, action: Action) -> None:
        if self.pull_slots is None:
            self.docker.ensure_image(action.target, always=action.always)
            return
        with self.pull_slots.held():
            self.docker.ensure_image(action.target, always=action.always)

    def _remove_network(self, action: Action) -> None:
        try:
            self.docker.remove_network(action.ref or action.target)
        except NetworkInUse as e:  # a container joined since the list: not ours to break
            log.info("network %s left for now: %s", action.target, e)

    def _process_runtime(self) -> ProcessRuntime:
        if self.processes is None:
            raise AgentError("host processes are not supported by this agent")
        return self.processes

    def _item(
        self,
        action: Action,
        results: dict[Action, ActionOutcome],
        failed_images: dict[str, str | None],
        containers: Collection[str],
        ready: Collection[str],
        names: Mapping[str, str],
    ) -> None:
        spec = _spec(action)
        done = {a.target: o for a, o in results.items() if a.op in _ITEM_OPS}
        for dep in action.depends_on:
            outcome = done.get(dep)
            if outcome is not None and outcome.error:
                raise AgentError(f"dependency {dep} failed: {outcome.error}")
            # A container dependency is waited for even when this pass left it alone: it
            # may be starting or unhealthy. One inspect when it is ready; none when the
            # list this pass began with showed it ready and the pass left it alone.
            if outcome is None and dep in ready:
                continue
            if dep in containers or (outcome is not None and outcome.action.op in _CONTAINER_OPS):
                try:
                    self.docker.wait_ready(names.get(dep, dep), timeout=self.ready_timeout)
                except AgentError as e:
                    raise AgentError(f"dependency {dep} is not ready: {e}") from e
        if action.op in (Op.CREATE, Op.RECREATE) and spec["image"] in failed_images:
            raise AgentError(f"image {spec['image']}: {failed_images[spec['image']]}")
        if action.op is Op.CREATE:
            self.docker.create_container(spec, name=action.name)
        elif action.op is Op.RECREATE:
            self.docker.remove_container(action.ref or action.target)
            self.docker.create_container(spec, name=action.name)
        elif action.op is Op.START:
            self.docker.start(action.ref or action.target, name=action.target)
        elif action.op is Op.START_PROCESS:
            self._process_runtime().start(spec)
        elif action.op is Op.RESTART_PROCESS:
            self._process_runtime().stop(action.target)
            self._process_runtime().start(spec)


def _spec(action: Action) -> Spec:
    if action.spec is None:
        raise AgentError(f"{action.describe()}: no spec")
    return action.spec


def _timed(action: Action, fn: Callable[[Action], None]) -> ActionOutcome:
    start = time.monotonic()
    try:
        fn(action)
    except AgentError as e:
        return ActionOutcome(action, str(e), time.monotonic() - start)
    except Exception as e:  # a bug in one item must not stop the others
        log.exception("unexpected error in %s", action.describe())
        return ActionOutcome(action, f"{type(e).__name__}: {e}", time.monotonic() - start)
    return ActionOutcome(action, None, time.monotonic() - start)
