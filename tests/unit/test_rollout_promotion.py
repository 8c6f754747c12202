"""Promotion: taken only while the canary waits for it, at the commit the request names.

The decision (``decide_promotion``), the planner's refusal to count a promotion given while
the canary wave still progresses, the gate's refusal to apply one named for another commit,
and the controller's answer over the states it remembers."""

from __future__ import annotations

from typing import Any

from config_sync.reporting import LocalReporter
from config_sync.rollouts.controller import RolloutController
from config_sync.rollouts.promotion import decide_promotion
from phrame.config_repo.update_policy import UpdatePolicy
from schemas import Topics
from tests.unit.test_rollout_plan import NEW, Fleet, _plan

SHA = "0a1b2c3d4e5f60718293a4b5c6d7e8f901234567"
OTHER = "ffeeddccbbaa99887766554433221100ffeeddcc"


def _doc(state: str, *, commit: str = SHA, wave: int = 1, done: int = 0, total: int = 2) -> dict[str, Any]:
    return {"state": state, "commit": commit, "wave": wave, "done": done, "total": total}


def test_a_progressing_wave_is_not_promoted() -> None:
    decided = decide_promotion("lab", "web", _doc("progressing"), SHA)
    assert decided.status == 409 and not decided.is_taken and decided.commit is None
    assert decided.message == "lab/web: nothing to promote: wave 1 is progressing (0/2 healthy)"


def test_a_waiting_canary_is_promoted_at_its_commit_or_a_unique_prefix() -> None:
    for given in (SHA, SHA[:7], SHA.upper()[:12]):
        decided = decide_promotion("lab", "web", _doc("waiting-promotion", done=1), given)
        assert decided.status == 202 and decided.commit == SHA, given


def test_another_commit_than_the_waiting_one_is_refused_naming_both() -> None:
    decided = decide_promotion("lab", "web", _doc("waiting-promotion"), OTHER)
    assert decided.status == 409 and OTHER[:12] in decided.message and SHA[:12] in decided.message


def test_a_request_without_a_commit_is_a_400_that_says_which_waits() -> None:
    for given in (None, "", 42, ["x"]):
        decided = decide_promotion("lab", "web", _doc("waiting-promotion"), given)
        assert decided.status == 400 and '"commit"' in decided.message and SHA in decided.message
    assert decide_promotion("lab", "web", _doc("waiting-promotion"), "xyz1234").status == 400
    assert decide_promotion("lab", "web", _doc("waiting-promotion"), "0a1b2c").status == 400  # under 7


def test_no_rollout_paused_or_complete_is_nothing_to_promote() -> None:
    assert decide_promotion("lab", "web", None, SHA).status == 409
    for state in ("paused", "rolled-back", "complete"):
        decided = decide_promotion("lab", "web", _doc(state), SHA)
        assert decided.status == 409 and "nothing to promote" in decided.message, state


def test_the_planner_ignores_a_promotion_given_before_the_canary_waits() -> None:
    policy, fleet = UpdatePolicy(max_parallel=2, canary=1, min_healthy_s=0, healthy_deadline_s=60), Fleet(4)
    plan = _plan(policy, fleet, None, 0.0)
    fleet.apply(plan)
    early = _plan(policy, fleet, plan.state, 1.0, promote=True)  # the canary is not running yet
    assert early.state is not None and early.state.state == "progressing" and not early.state.promoted
    fleet.run("lab.web.0", NEW, healthy_since=2.0)
    waits = _plan(policy, fleet, early.state, 3.0)
    assert waits.state is not None and waits.state.state == "waiting-promotion"  # it stops at the canary
    assert waits.released == {"lab.web.0"}


def _controller() -> RolloutController:
    return RolloutController(Topics(), LocalReporter(), spec_at=lambda _c: None)


def test_the_controller_queues_only_a_promotion_that_is_taken() -> None:
    controller = _controller()
    key = ("lab", "web")
    controller.active[key], controller.last[key] = "main", _doc("progressing")
    refused = controller.promote("lab", "web", SHA)
    assert refused.status == 409 and controller.promotions == {}
    controller.last[key] = _doc("waiting-promotion", done=1)
    assert controller.promote("lab", "web", OTHER).status == 409 and controller.promotions == {}
    taken = controller.promote("lab", "web", SHA[:10])
    assert taken.status == 202 and controller.promotions == {key: SHA}


def test_a_finished_rollout_it_remembers_is_nothing_to_promote() -> None:
    controller = _controller()
    controller.last[("lab", "web")] = _doc("waiting-promotion")  # remembered, no longer active
    assert controller.promote("lab", "web", SHA).status == 409
