"""When the rollout controller asks for a pass of a ref, on a fake clock: a rollout's deadline
when due (not before), a change of a rolling service's containers at once, every active
rollout after ``tick_s`` without one; never for a service that is not rolling."""

from __future__ import annotations

import threading

from config_sync.publication.sender import SyncOutcome
from config_sync.reporting import LocalReporter
from config_sync.rollouts.controller import RolloutController
from config_sync.rollouts.gate import Gated
from config_sync.rollouts.models import RolloutState
from config_sync.rollouts.waves import RolloutPlan
from schemas import Topics
from tests.support.services import eventually

COMMIT = "c" * 40


class FakeClock:
    def __init__(self) -> None:
        self.now = 1_800_000_000.0

    def __call__(self) -> float:
        return self.now


def rolling(controller: RolloutController, clock: FakeClock, *, due_in: float) -> None:
    """A pass of ``main`` published a progressing rollout of lab/web whose verdict is due later."""
    state = RolloutState("lab", "web", COMMIT, ("lab.web.0",), {"lab.web.0": "sha256:" + "0" * 64}, waves=1)
    plan = RolloutPlan(state, current=True, due=clock.now + due_in)
    outcome = SyncOutcome("main", COMMIT, True, ["lab"], rollouts=Gated({}, plans={("lab", "web"): plan}))
    assert controller.deploy_view("main", outcome)[0]  # still rolling


def test_a_deadline_a_container_change_and_the_tick_each_queue_a_pass_of_the_ref() -> None:
    clock = FakeClock()
    controller = RolloutController(Topics(), LocalReporter(), spec_at=lambda _: None, clock=clock, tick_s=60)
    passes: list[str] = []
    ran = threading.Semaphore(0)

    def trigger(ref: str) -> None:
        passes.append(ref)
        ran.release()

    controller.trigger = trigger
    controller.start()
    try:
        rolling(controller, clock, due_in=30)
        clock.now += 29.9
        controller.runner.queue.wake()
        assert not ran.acquire(timeout=0.2)  # not due yet
        clock.now += 0.1
        controller.runner.queue.wake()
        assert ran.acquire(timeout=5) and passes == ["main"]
        running = {"state": "running", "digest": "sha256:" + "1" * 64}
        controller.view.item("n1", "containers", "lab.other.0", running)  # not rolling: nothing
        controller.view.item("n1", "containers", "lab.web.0", running)  # its container changed: at once
        assert ran.acquire(timeout=5) and passes == ["main", "main"]
        assert eventually(controller.runner.queue.is_idle)
        clock.now += 60  # a tick with nothing else: every active rollout once
        controller.runner.queue.wake()
        assert ran.acquire(timeout=5) and passes == ["main"] * 3
        assert not ran.acquire(timeout=0.2)
    finally:
        controller.stop()
