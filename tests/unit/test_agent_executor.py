"""Executor ordering and bounds, with a recording runtime at the ContainerRuntime seam."""

from __future__ import annotations

import threading
import time
from typing import Any

from node_agent.errors import DockerError
from node_agent.executor import Executor
from node_agent.models import DIGEST, MANAGED, NODE, ActualState, ObservedContainer, ObservedProcess, Op
from node_agent.plan import compute_plan
from tests.support import agent_support as spec


class RecordingRuntime:
    """Records calls; ``fail`` names targets whose call raises; tracks concurrency."""

    def __init__(self, fail: set[str] | None = None, delay: float = 0.02) -> None:
        self.calls: list[tuple[str, str]] = []
        self.fail = fail or set()
        self.delay = delay
        self.active = 0
        self.peak = 0
        self.lock = threading.Lock()

    def _do(self, op: str, target: str) -> None:
        with self.lock:
            self.active += 1
            self.peak = max(self.peak, self.active)
        time.sleep(self.delay)
        with self.lock:
            self.active -= 1
            self.calls.append((op, target))
        if target in self.fail:
            raise DockerError(f"{op} {target}: boom")

    def ensure_image(self, image: str, *, always: bool = False) -> None:
        self._do("pull", image)

    def create_container(self, s: Any, *, name: str | None = None) -> str:
        self._do("create", name or s["name"])
        return "id"

    def start(self, ref: str, *, name: str | None = None) -> None:
        self._do("start", ref)

    def remove_container(self, ref: str) -> None:
        self._do("remove", ref)

    def wait_ready(self, name: str, *, timeout: float = 120.0, poll: float = 0.2) -> None:
        self._do("ready", name)

    def create_network(self, s: Any) -> None:
        self._do("network", s["name"])

    def remove_network(self, ref: str) -> None:
        self._do("rmnet", ref)


def test_networks_then_images_then_dependency_levels_with_bounded_parallelism():
    net = spec.network("e", "n")
    db = spec.container("e", "db", networks=["e.n"])
    api = spec.container("e", "api", depends_on=["e.db.0"])
    others = [spec.container("e", f"w{i}") for i in range(6)]
    plan = compute_plan(spec.desired([net, db, api, *others]), ActualState(), node="a")
    rt = RecordingRuntime()
    outcomes = Executor(rt, parallelism=3).apply(plan)
    assert all(o.ok for o in outcomes)
    order = [c for c in rt.calls]
    assert order[0] == ("network", "e.n") and order[1] == ("pull", "img:1")
    assert order.index(("ready", "e.db.0")) < order.index(("create", "e.api.0"))
    assert order.index(("create", "e.db.0")) < order.index(("ready", "e.db.0"))
    assert 1 < rt.peak <= 3


def test_a_failure_skips_its_dependants_only():
    db = spec.container("e", "db")
    api = spec.container("e", "api", depends_on=["e.db.0"])
    web = spec.container("e", "web")
    plan = compute_plan(spec.desired([db, api, web]), ActualState(), node="a")
    outcomes = Executor(RecordingRuntime(fail={"e.db.0"}), parallelism=2).apply(plan)
    errors = {o.action.target: o.error for o in outcomes}
    assert "boom" in (errors["e.db.0"] or "")
    assert "dependency e.db.0 failed" in (errors["e.api.0"] or "")
    assert errors["e.web.0"] is None and errors["img:1"] is None
    assert [o.action.op for o in outcomes] == [Op.PULL_IMAGE, Op.CREATE, Op.CREATE, Op.CREATE]


def test_failed_pull_fails_the_containers_of_that_image():
    a = spec.container("e", "a", image="x:1")
    b = spec.container("e", "b", image="y:1")
    plan = compute_plan(spec.desired([a, b]), ActualState(), node="a")
    outcomes = Executor(RecordingRuntime(fail={"x:1"})).apply(plan)
    errors = {o.action.target: o.error for o in outcomes}
    assert "image x:1" in (errors["e.a.0"] or "") and errors["e.b.0"] is None


def test_a_dependency_left_alone_by_this_pass_is_still_waited_for():
    # db runs already (perhaps unhealthy, starting or restarting): the plan does not touch it
    db = spec.container("e", "db")
    api = spec.container("e", "api", depends_on=["e.db.0", "e.job.0"])
    job = spec.process("e", "job", ["sleep", "1"])
    seen_db = ObservedContainer(
        "id-db",
        "e.db.0",
        "running",
        {MANAGED: "true", NODE: "a", DIGEST: db["digest"], **spec.item_labels("e.db.0")},
    )
    seen_job = ObservedProcess("e.job.0", pid=3, state="running", digest=job["digest"])
    d = spec.desired([db, api, job])
    plan = compute_plan(
        d, ActualState(containers={"e.db.0": seen_db}, processes={"e.job.0": seen_job}), node="a"
    )
    assert [(a.op, a.target) for a in plan.actions] == [(Op.PULL_IMAGE, "img:1"), (Op.CREATE, "e.api.0")]
    rt = RecordingRuntime()
    assert all(o.ok for o in Executor(rt).apply(plan, containers=d.containers))
    assert rt.calls == [("pull", "img:1"), ("ready", "e.db.0"), ("create", "e.api.0")]  # no wait on a process
    # not ready (wait_ready gave up): the dependant is not created, and says why
    failing = RecordingRuntime(fail={"e.db.0"})
    outcomes = Executor(failing).apply(plan, containers=d.containers)
    assert "dependency e.db.0 is not ready" in (outcomes[1].error or "")
    assert ("create", "e.api.0") not in failing.calls
