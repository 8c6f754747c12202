"""A paused or rolled-back rollout and the next commit of its service: a commit that changes
the service's spec or its ``update:`` policy starts a rollout of its own (the replicas the
held one released, already on the spec, judged again first); one that changes neither (a
placement commit, another service) leaves it held. Also from the retained document, as a
restarted config-sync reads it."""

from __future__ import annotations

from config_sync.rollouts.models import Observed, ReplicaView, RolloutState, state_from_doc
from config_sync.rollouts.waves import RolloutPlan, plan_rollout
from phrame.config_repo.update_policy import UpdatePolicy

OLD, BAD = "sha256:" + "0" * 64, "sha256:" + "1" * 64
ITEMS = ("lab.web.0", "lab.web.1", "lab.web.2")
SHORT = UpdatePolicy(max_parallel=1, min_healthy_s=1, healthy_deadline_s=4)
LONGER = UpdatePolicy(max_parallel=1, min_healthy_s=1, healthy_deadline_s=30)


def views(published: dict[str, str], actual: dict[str, Observed]) -> list[ReplicaView]:
    return [ReplicaView(i, "n0", published[i], BAD, actual.get(i), old_commit="c0") for i in ITEMS]


def plan(
    policy: UpdatePolicy, state: RolloutState | None, commit: str, now: float, *, healthy: bool = True
) -> RolloutPlan:
    published = {"lab.web.0": BAD, "lab.web.1": OLD, "lab.web.2": OLD}  # wave 1 released
    actual = {
        # started at 1 s, healthy at 9 s: later than a 4 s deadline
        "lab.web.0": Observed(
            BAD, "running", *(("healthy", 0, 9.0) if healthy else ("starting", 0, None)), "t1", 1.0
        ),
        "lab.web.1": Observed(OLD, "running", "healthy", 0, 0.0, "t0", 0.0),
        "lab.web.2": Observed(OLD, "running", "healthy", 0, 0.0, "t0", 0.0),
    }
    return plan_rollout(
        policy, views(published, actual), state, environment="lab", service="web", commit=commit, now=now
    )


def paused() -> RolloutState:
    first = plan_rollout(
        SHORT,
        views(dict.fromkeys(ITEMS, OLD), {}),
        None,
        environment="lab",
        service="web",
        commit="c1",
        now=0.0,
    )
    assert first.released == {"lab.web.0"} and first.state is not None
    slow = plan(SHORT, first.state, "c1", 6.0, healthy=False)
    assert slow.state is not None and slow.state.state == "paused", slow.state
    return slow.state


def test_a_commit_that_changes_only_the_policy_starts_a_new_rollout() -> None:
    held = paused()
    renewed = plan(LONGER, held, "c2", 20.0)
    assert renewed.state is not None and renewed.state.commit == "c2", renewed.state
    assert renewed.state.state == "progressing" and renewed.state.items == ITEMS
    # the replica the paused one released is judged again first, from now: healthy, so wave 2 goes
    assert renewed.released == {"lab.web.0", "lab.web.1"} and renewed.state.wave == 2
    assert renewed.state.previous["lab.web.0"] == {"commit": "c0", "digest": OLD}  # still rolls back to OLD


def test_a_commit_that_changes_neither_leaves_it_paused() -> None:
    held = paused()
    same = plan(SHORT, held, "c2", 20.0)  # placement committed, or another service changed
    assert same.state is not None and same.state.commit == "c1" and same.state.state == "paused"
    assert same.released == {"lab.web.0"}


def test_the_policy_is_read_back_after_a_restart() -> None:
    held = paused()
    back = state_from_doc(held.to_doc())
    assert back is not None and back.update == SHORT
    assert plan(SHORT, back, "c2", 20.0).state == plan(SHORT, held, "c2", 20.0).state
    renewed = plan(LONGER, back, "c2", 20.0)
    assert renewed.state is not None and renewed.state.commit == "c2"
