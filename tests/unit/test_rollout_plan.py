"""The wave planner, purely: waves, health, deadlines, canary and promotion, pause and
rollback, resuming from the retained document; and a property test over random fleets."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from hypothesis import given, settings
from hypothesis import strategies as st

from config_sync.rollouts.models import Observed, ReplicaView, RolloutState, state_from_doc
from config_sync.rollouts.waves import RolloutPlan, plan_rollout
from phrame.config_repo.update_policy import UpdatePolicy

OLD, NEW = "sha256:" + "0" * 64, "sha256:" + "1" * 64


def _items(n: int) -> list[str]:
    return [f"lab.web.{i}" for i in range(n)]


@dataclass
class Fleet:
    """Replicas as a broker and nodes would hold them: ``published`` digests and reports."""

    n: int
    published: dict[str, str] = field(default_factory=dict)
    actual: dict[str, Observed] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for item in _items(self.n):
            self.published.setdefault(item, OLD)
            self.actual.setdefault(item, Observed(OLD, "running", None, 0, 0.0))

    def views(self, new: str = NEW) -> list[ReplicaView]:
        return [
            ReplicaView(i, f"n{k % 2}", self.published[i], new, self.actual[i], old_commit="c0")
            for k, i in enumerate(_items(self.n))
        ]

    def apply(self, plan: RolloutPlan, new: str = NEW) -> None:
        for item in plan.released:
            self.published[item] = new
        for item in plan.restore:
            self.published[item] = OLD

    def run(self, item: str, digest: str, *, healthy_since: float | None, health: str | None = None) -> None:
        self.actual[item] = Observed(digest, "running", health, 0, healthy_since)


def _plan(
    policy: UpdatePolicy, fleet: Fleet, state: RolloutState | None, now: float, **kw: bool
) -> RolloutPlan:
    return plan_rollout(
        policy, fleet.views(), state, environment="lab", service="web", commit="c1", now=now, **kw
    )


def test_waves_of_one_wait_for_min_healthy() -> None:
    policy, fleet = UpdatePolicy(max_parallel=1, min_healthy_s=10, healthy_deadline_s=60), Fleet(3)
    plan = _plan(policy, fleet, None, 100.0)
    assert plan.released == {"lab.web.0"} and plan.state is not None
    assert (plan.state.wave, plan.state.waves, plan.state.state) == (1, 3, "progressing")
    assert plan.state.previous["lab.web.0"] == {"commit": "c0", "digest": OLD}
    fleet.apply(plan)
    fleet.run("lab.web.0", NEW, healthy_since=105.0)
    assert plan.due == 160.0  # nothing healthy yet: the deadline
    held = _plan(policy, fleet, plan.state, 110.0)  # healthy for 5 s of 10
    assert held.released == {"lab.web.0"} and held.state is not None and held.state.done == 0
    assert held.due == 115.0  # the next pass is due when min_healthy_s is over, not on a timer
    nxt = _plan(policy, fleet, held.state, 115.0)
    assert nxt.released == {"lab.web.0", "lab.web.1"} and nxt.state is not None
    assert (nxt.state.wave, nxt.state.done) == (2, 1)
    assert nxt.state.description() == "web: wave 2/3 (1/3 healthy)"


def test_unhealthy_replica_pauses_and_nothing_more_is_released() -> None:
    policy, fleet = UpdatePolicy(max_parallel=1, healthy_deadline_s=60), Fleet(4)
    plan = _plan(policy, fleet, None, 0.0)
    fleet.apply(plan)
    fleet.run("lab.web.0", NEW, healthy_since=None, health="unhealthy")
    paused = _plan(policy, fleet, plan.state, 5.0)
    assert paused.state is not None and paused.state.state == "paused" and paused.is_held
    assert paused.released == {"lab.web.0"} and not paused.restore
    assert [(r.node, r.replica, r.reason) for r in paused.state.reasons] == [
        ("n0", "lab.web.0", "healthcheck unhealthy")
    ]
    fleet.run("lab.web.0", NEW, healthy_since=6.0)  # healthy later: a pause holds anyway
    again = _plan(policy, fleet, paused.state, 100.0)
    assert again.state is not None and again.state.state == "paused" and again.released == {"lab.web.0"}


def test_deadline_and_crash_loop_fail_the_wave() -> None:
    policy, fleet = UpdatePolicy(max_parallel=2, healthy_deadline_s=30), Fleet(4)
    plan = _plan(policy, fleet, None, 0.0)
    fleet.apply(plan)
    fleet.actual["lab.web.0"] = Observed(NEW, "restarting", None, 3, None)
    # never got the new spec: its node reports why (the old one runs on)
    fleet.actual["lab.web.1"] = Observed(OLD, "running", None, 0, 0.0, error="pull busybox:2: not found")
    early = _plan(policy, fleet, plan.state, 10.0)
    assert early.state is not None
    assert [r.reason for r in early.state.reasons] == ["crash-looping: restarted 3 times"]
    fleet.actual["lab.web.0"] = Observed(NEW, "running", "starting", 0, None)
    late = _plan(policy, fleet, plan.state, 31.0)
    assert late.state is not None and late.state.state == "paused"
    assert [r.replica for r in late.state.reasons] == ["lab.web.0", "lab.web.1"]
    assert "not healthy 30 s" in late.state.reasons[0].reason
    assert "not running the new spec" in late.state.reasons[1].reason


def test_rollback_restores_the_released_replicas() -> None:
    policy, fleet = (
        UpdatePolicy(max_parallel=1, healthy_deadline_s=5, min_healthy_s=1, on_failure="rollback"),
        Fleet(3),
    )
    plan = _plan(policy, fleet, None, 0.0)
    fleet.apply(plan)
    fleet.actual["lab.web.0"] = Observed(NEW, "running", "starting", 0, None, running_since=0.5)
    back = _plan(policy, fleet, plan.state, 6.0)
    assert back.state is not None and back.state.state == "rolled-back"
    assert back.restore == {"lab.web.0"} and not back.released and back.is_held
    fleet.apply(back)
    # after the rollback nothing differs from the state's view but the target: it stays rolled back
    still = _plan(policy, fleet, back.state, 7.0)
    assert still.state is not None and still.state.state == "rolled-back" and still.restore == {"lab.web.0"}


def test_canary_waits_for_promotion() -> None:
    policy, fleet = UpdatePolicy(max_parallel=2, canary=1, min_healthy_s=0, healthy_deadline_s=60), Fleet(4)
    plan = _plan(policy, fleet, None, 0.0)
    assert plan.released == {"lab.web.0"}
    fleet.apply(plan)
    fleet.run("lab.web.0", NEW, healthy_since=1.0)
    waiting = _plan(policy, fleet, plan.state, 2.0)
    assert waiting.state is not None and waiting.state.state == "waiting-promotion"
    assert waiting.released == {"lab.web.0"} and not waiting.is_held
    assert "phrame promote lab web" in waiting.state.description()
    assert _plan(policy, fleet, waiting.state, 50.0).released == {"lab.web.0"}  # time alone does not promote
    promoted = _plan(policy, fleet, waiting.state, 51.0, promote=True)
    assert promoted.released == {"lab.web.0", "lab.web.1", "lab.web.2"}
    assert promoted.state is not None and (promoted.state.wave, promoted.state.waves) == (2, 3)


def test_complete_and_a_new_commit_starts_from_what_runs() -> None:
    policy, fleet = UpdatePolicy(min_healthy_s=0), Fleet(2)
    plan = _plan(policy, fleet, None, 0.0)
    assert plan.released == {"lab.web.0", "lab.web.1"}  # no max_parallel: one wave
    fleet.apply(plan)
    for item in _items(2):
        fleet.run(item, NEW, healthy_since=1.0)
    done = _plan(policy, fleet, plan.state, 2.0)
    assert done.state is not None and done.state.state == "complete" and done.state.done == 2
    newer = "sha256:" + "2" * 64
    views = [replace(v, new=newer) for v in fleet.views()]
    nxt = plan_rollout(policy, views, done.state, environment="lab", service="web", commit="c2", now=3.0)
    assert nxt.state is not None and nxt.state.commit == "c2" and nxt.state.target["lab.web.0"] == newer


def test_unchanged_replicas_are_not_part_of_it() -> None:
    fleet = Fleet(3)
    fleet.published["lab.web.1"] = NEW  # already on the new spec
    plan = _plan(UpdatePolicy(max_parallel=1), fleet, None, 0.0)
    assert plan.state is not None and plan.state.items == ("lab.web.0", "lab.web.2")
    assert _plan(UpdatePolicy(), Fleet(2), None, 0.0).state is not None
    same = plan_rollout(
        UpdatePolicy(), Fleet(2).views(OLD), None, environment="lab", service="web", commit="c", now=0
    )
    assert same.state is None and not same.released


def test_resumes_from_the_retained_document() -> None:
    policy, fleet = UpdatePolicy(max_parallel=1, min_healthy_s=0, healthy_deadline_s=60), Fleet(3)
    plan = _plan(policy, fleet, None, 0.0)
    fleet.apply(plan)
    assert plan.state is not None
    restored = state_from_doc(plan.state.to_doc())
    assert restored == plan.state
    # wave 2 was published but the process stopped before the state was: counted released
    fleet.run("lab.web.0", NEW, healthy_since=0.5)
    fleet.published["lab.web.1"] = NEW
    again = _plan(policy, fleet, restored, 1.0)
    assert again.released == {"lab.web.0", "lab.web.1"} and again.state is not None
    assert again.state.wave == 2  # not jumped to wave 3: web.1 is not healthy yet
    assert state_from_doc({"state": "exploded"}) is None and state_from_doc([]) is None


# -- property: random fleets, policies and behaviours
@st.composite
def scenarios(draw: st.DrawFn) -> tuple[UpdatePolicy, int, list[tuple[int, int | None, bool]], list[int]]:
    n = draw(st.integers(1, 7))
    policy = UpdatePolicy(
        max_parallel=draw(st.one_of(st.none(), st.integers(1, 4))),
        canary=draw(st.integers(0, n)),
        min_healthy_s=draw(st.integers(0, 4)),
        healthy_deadline_s=draw(st.integers(5, 12)),
        on_failure=draw(st.sampled_from(["pause", "rollback"])),
    )
    # per replica: seconds until its node runs the new spec, until it is healthy (None: never), crash
    behaviour = [
        (draw(st.integers(0, 3)), draw(st.one_of(st.none(), st.integers(0, 6))), draw(st.booleans()))
        for _ in range(n)
    ]
    promotions = draw(st.lists(st.integers(0, 40), max_size=3))
    return policy, n, behaviour, promotions


@settings(max_examples=300, deadline=None)
@given(scenarios())
def test_never_more_than_a_wave_off_spec_or_unhealthy(
    case: tuple[UpdatePolicy, int, list[tuple[int, int | None, bool]], list[int]],
) -> None:
    policy, n, behaviour, promotions = case
    fleet, state = Fleet(n), None
    released_when: dict[str, int] = {}
    wave_cap = max(policy.max_parallel or n, policy.canary)
    before: frozenset[str] = frozenset()
    ever: set[str] = set()
    for now in range(0, 60):
        for k, item in enumerate(_items(n)):
            if fleet.published[item] != NEW or item not in released_when:
                continue
            delay, healthy_after, crashes = behaviour[k]
            age = now - released_when[item]
            if age < delay:
                continue
            if crashes:
                fleet.actual[item] = Observed(NEW, "restarting", None, 3, None)
            elif healthy_after is not None and age >= delay + healthy_after:
                fleet.run(item, NEW, healthy_since=float(released_when[item] + delay + healthy_after))
            else:
                fleet.run(item, NEW, healthy_since=None, health="starting")
        plan = _plan(policy, fleet, state, float(now), promote=now in promotions)
        assert plan.state is not None
        released = plan.released | plan.restore
        items = plan.state.items
        assert list(items[: len(plan.state.released())]) == [i for i in items if i in plan.state.released_at]
        if plan.state.state in ("progressing", "waiting-promotion", "complete"):
            assert before <= plan.released  # never un-released
            newly = plan.released - before
            if newly and before:  # a new wave starts only when every earlier replica is healthy
                assert all(fleet.actual[i].healthy_since is not None for i in before)
            not_healthy = [i for i in plan.released if fleet.actual[i].healthy_since is None]
            assert len(not_healthy) <= wave_cap
            if policy.canary and not plan.state.promoted:
                assert len(plan.released) <= policy.canary
        else:
            # a failed rollout releases nothing more: only what was released, kept or put back
            assert released <= set(plan.state.released()) <= set(ever)
        for item in plan.released - before:
            released_when[item] = now
        fleet.apply(plan)
        ever |= plan.released
        before, state = plan.released, plan.state
        if plan.state.state in ("paused", "rolled-back"):
            assert plan.is_held and plan.state.reasons
