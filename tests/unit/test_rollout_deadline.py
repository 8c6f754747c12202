"""``healthy_deadline_s`` with a fake clock: it counts from the replica's start on the new spec,
never while its old replica still runs (its stop may take its whole grace), and only while
its node reports; a replica placement moves starts its count again; and the watch that
tells when a node reported and when a replica started running."""

from __future__ import annotations

from config_sync.rollouts.controller import observed_of
from config_sync.rollouts.models import Observed, ReplicaView, RolloutState
from config_sync.rollouts.waves import RolloutPlan, Silent, never_silent, plan_rollout
from phrame.actual import ActualView
from phrame.actual.silence import NodeSilence
from phrame.config_repo.update_policy import UpdatePolicy
from schemas import Topics

OLD, NEW = "sha256:" + "0" * 64, "sha256:" + "1" * 64
ITEMS = ["lab.web.0", "lab.web.1"]
WAVES = UpdatePolicy(max_parallel=1, min_healthy_s=1, healthy_deadline_s=25)
T = Topics()


def views(actual: dict[str, Observed | None], nodes: dict[str, str] | None = None) -> list[ReplicaView]:
    published = {"lab.web.0": NEW, "lab.web.1": OLD}  # wave 1 released: .0 carries the new spec
    where = nodes or {"lab.web.0": "n0", "lab.web.1": "n1"}
    return [ReplicaView(i, where[i], published[i], NEW, actual.get(i), old_commit="c0") for i in ITEMS]


def step(
    state: RolloutState | None,
    now: float,
    actual: dict[str, Observed | None],
    *,
    policy: UpdatePolicy = WAVES,
    silent: Silent = never_silent,
    nodes: dict[str, str] | None = None,
) -> RolloutPlan:
    replicas = views(actual, nodes)
    if state is None:  # nothing released yet: what the broker held before the commit
        replicas = [ReplicaView(v.item, v.node, OLD, NEW, v.actual, old_commit="c0") for v in replicas]
    return plan_rollout(
        policy, replicas, state, environment="lab", service="web", commit="c1", now=now, silent=silent
    )


def old(since: float = 0.0) -> Observed:
    return Observed(OLD, "running", None, 0, since, "t0", since)


def test_the_deadline_counts_from_the_replica_start_not_its_release() -> None:
    first = step(None, 0.0, {"lab.web.0": old(), "lab.web.1": old()})
    assert first.released == {"lab.web.0"} and first.state is not None
    # a slow pull: the new container starts 20 s after the release, its healthcheck still starting
    starting = Observed(NEW, "running", "starting", 0, None, "t1", running_since=20.0)
    later = step(first.state, 30.0, {"lab.web.0": starting, "lab.web.1": old()})
    assert later.state is not None and later.state.state == "progressing", later.state.reasons
    assert later.due == 45.0  # 25 s after its start
    failed = step(later.state, 45.0, {"lab.web.0": starting, "lab.web.1": old()})
    assert failed.state is not None and failed.state.state == "paused"
    assert [r.reason for r in failed.state.reasons] == [
        "not healthy 25 s after it started (state running, health starting)"
    ]


def test_the_deadline_counts_only_while_the_node_reports() -> None:
    silence = NodeSilence(grace_s=3.0)
    for at in range(6):  # n0 heartbeats each second, then its agent stalls from 5 s to 40 s
        silence.heard("n0", float(at))
    first = step(None, 0.0, {"lab.web.0": old(), "lab.web.1": old()}, silent=silence.silent)
    assert first.state is not None
    silence.heard("n0", 40.0)
    # nothing reported of the released replica (its node never took it): counted from its release
    back = step(first.state, 41.0, {"lab.web.0": None, "lab.web.1": old()}, silent=silence.silent)
    assert back.state is not None and back.state.state == "progressing", back.state.reasons  # 9 s counted
    for at in range(41, 58):
        silence.heard("n0", float(at))
    late = step(back.state, 57.0, {"lab.web.0": None, "lab.web.1": old()}, silent=silence.silent)
    assert late.state is not None and late.state.state == "paused"  # 8 + 17 = 25 s counted
    assert late.state.reasons[0].reason == "not running the new spec 25 s after its release (not reported)"


def test_a_waiting_canary_placement_moves_starts_its_deadline_again() -> None:
    canary = UpdatePolicy(max_parallel=1, canary=1, min_healthy_s=1, healthy_deadline_s=25)
    first = step(None, 0.0, {"lab.web.0": old(), "lab.web.1": old()}, policy=canary)
    healthy = Observed(NEW, "running", "healthy", 0, 3.0, "t1", 2.0)
    waiting = step(first.state, 10.0, {"lab.web.0": healthy, "lab.web.1": old()}, policy=canary)
    assert waiting.state is not None and waiting.state.state == "waiting-promotion"
    # its node went away: placement moved the canary to n1, where it is not reported yet
    moved = {"lab.web.0": "n1", "lab.web.1": "n1"}
    gone = step(waiting.state, 40.0, {"lab.web.1": old()}, policy=canary, nodes=moved)
    assert gone.state is not None and gone.state.state == "progressing", gone.state.reasons
    assert gone.state.released_at["lab.web.0"] == 40.0 and gone.state.nodes["lab.web.0"] == "n1"
    there = Observed(NEW, "running", "healthy", 0, 44.0, "t2", 43.0)
    again = step(gone.state, 45.0, {"lab.web.0": there, "lab.web.1": old()}, policy=canary, nodes=moved)
    assert again.state is not None and again.state.state == "waiting-promotion"


def test_node_silence_counts_the_time_after_the_grace_without_a_message() -> None:
    silence = NodeSilence(grace_s=3.0)
    assert silence.silent("n0", 0.0, 10.0) == 10.0  # never heard: not reporting
    for at in (0.0, 1.0, 2.0, 10.0):
        silence.heard("n0", at)
    assert silence.silent("n0", 0.0, 12.0) == 5.0  # from 5 (2 + grace) to 10
    assert silence.silent("n0", 6.0, 12.0) == 4.0
    assert silence.silent("n0", 0.0, 20.0) == 12.0  # and again from 13
    assert silence.silent("n1", 5.0, 5.0) == 0.0


def test_the_view_notes_the_start_on_a_digest_and_live_reports_only() -> None:
    now = [100.0]
    view = ActualView(T, timeout_s=3.0, clock=lambda: now[0])

    def report(doc: dict[str, object], *, retained: bool = False) -> None:
        view.item("n0", "containers", "lab.web.0", doc, retained=retained)

    def seen() -> Observed | None:
        return observed_of(view.report("n0", "containers", "lab.web.0"))

    report({"state": "created", "digest": NEW, "started_at": None}, retained=True)
    assert seen() == Observed(NEW, "created", None, None, None, None, None, state_since=100.0)
    assert view.silent("n0", 100.0, 101.0) == 1.0  # a retained report is no news of the node
    now[0] = 102.0
    report({"state": "running", "health": "starting", "digest": NEW, "started_at": "a"})
    now[0] = 110.0  # restarted: a new start, the same digest: its deadline does not start again
    report({"state": "running", "health": "starting", "digest": NEW, "started_at": "b"})
    got = seen()
    assert got is not None and got.running_since == 102.0 and got.started_at == "b"
    assert got.state_since == 102.0  # running on NEW since 102: a restart is no new state
    assert view.silent("n0", 102.0, 110.0) == 5.0  # reported at 102 and 110 only
    now[0] = 111.0
    report({"state": "running", "health": None, "digest": OLD, "started_at": "c"})
    got = seen()
    assert got is not None and got.running_since == 111.0  # another digest: another start


class Node:
    """One node's reports of ``lab.web.0`` through the real view, on a fake clock; the node
    heartbeats at every step, so it always reports."""

    def __init__(self) -> None:
        self.now = 0.0
        self.view = ActualView(T, timeout_s=3.0, clock=lambda: self.now)

    def at(self, now: float, doc: dict[str, object] | None = None) -> dict[str, Observed | None]:
        self.now = now
        self.view.heartbeat("n0", {"ts": now, "interval_s": 1}, retained=False)
        if doc is not None:
            self.view.item("n0", "containers", "lab.web.0", doc)
        return {
            "lab.web.0": observed_of(self.view.report("n0", "containers", "lab.web.0")),
            "lab.web.1": old(),
        }

    def beating(self, start: float, end: float) -> None:
        for at in range(int(start), int(end)):
            self.at(float(at))


SLOW_STOP = UpdatePolicy(max_parallel=1, min_healthy_s=1, healthy_deadline_s=12)
RUNNING_OLD = {"state": "running", "health": "healthy", "digest": OLD, "started_at": "a"}


def test_the_old_replicas_stop_is_not_counted_against_the_deadline() -> None:
    """Its old replica takes its 10 s stop grace, the new one starts 13 s after the release:
    the deadline counts from the new one's start."""
    node = Node()
    first = step(None, 0.0, node.at(0.0, RUNNING_OLD), policy=SLOW_STOP)
    assert first.released == {"lab.web.0"}
    node.beating(1, 12)  # the node's agent is stopping the old replica: it still runs
    stopping = step(first.state, 12.5, node.at(12.5), policy=SLOW_STOP)
    assert stopping.state is not None and stopping.state.state == "progressing", stopping.state.reasons
    started = {"state": "running", "health": "starting", "digest": NEW, "started_at": "b"}
    node.at(13.0, started)
    node.beating(14, 20)
    starting = step(stopping.state, 20.0, node.at(20.0), policy=SLOW_STOP)
    assert starting.state is not None and starting.state.state == "progressing", starting.state.reasons
    assert starting.due == 25.0  # 12 s after its start
    node.at(21.0, {**started, "health": "healthy"})
    healthy = step(starting.state, 22.0, node.at(22.0), policy=SLOW_STOP)
    assert healthy.state is not None and healthy.state.wave == 2, healthy.state


def test_before_it_runs_the_count_starts_when_its_old_replica_stopped() -> None:
    node = Node()
    first = step(None, 0.0, node.at(0.0, RUNNING_OLD), policy=SLOW_STOP)
    node.beating(1, 10)
    created = {"state": "created", "health": None, "digest": NEW, "started_at": None}
    node.at(10.0, created)  # the old one is gone, the new one created but not started
    node.beating(11, 21)
    waiting = step(first.state, 21.0, node.at(21.0, {**created, "error": None}), policy=SLOW_STOP)
    assert waiting.state is not None and waiting.state.state == "progressing", waiting.state.reasons
    assert waiting.due == 22.0
    node.beating(22, 22)
    late = step(waiting.state, 22.0, node.at(22.0), policy=SLOW_STOP)
    assert late.state is not None and late.state.state == "paused"
    assert late.state.reasons[0].reason.startswith("not running the new spec 12 s after"), late.state.reasons


def test_an_old_replica_its_node_cannot_replace_counts_from_the_release() -> None:
    """A node that reports an error on it (a pull of the new image refused): the old one runs
    on, and the deadline counts from the release as before."""
    node = Node()
    first = step(None, 0.0, node.at(0.0, RUNNING_OLD), policy=SLOW_STOP)
    node.at(1.0, {**RUNNING_OLD, "error": "pull busybox:2: not found"})
    node.beating(2, 12)
    late = step(first.state, 12.0, node.at(12.0), policy=SLOW_STOP)
    assert late.state is not None and late.state.state == "paused", late.state
