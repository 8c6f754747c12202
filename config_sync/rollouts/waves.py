"""The wave planner of a staged rollout: which replicas get the new spec now. Pure.

:func:`plan_rollout` takes the service's policy, its replicas in a stable order (what is
published, what the commit renders, what the nodes report), the rollout's retained state
and ``now``; it returns the replicas released (they get the rendered spec), those to put
back (rollback) and the new state. Config-sync's gate (:mod:`config_sync.rollouts.gate`) calls it
on every sync and on every change of the actual plane; the same inputs give the same answer,
so a restart resumes from the retained state. ``healthy_deadline_s`` counts from the
replica's start on the new spec, never while its old replica still runs (a stop may take its
whole grace; see :func:`_counted`), and only while its node reports (``silent``). It never
releases a wave while a released replica is not healthy, never un-releases one (except by
rollback) and never passes a canary wave without a promotion. A wave that changes an image
waits until its replicas' nodes report that image pulled (``ReplicaView.pull``): its replace is
then a stop and a start; a failed pull fails the rollout before any of its replicas is stopped.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace

from config_sync.rollouts.models import Observed, ReplicaView, RolloutState
from phrame.actual.health import Reason
from phrame.config_repo.update_policy import UpdatePolicy

CRASH_LOOP_RESTARTS = 3  # restarts on the new spec that count as crash-looping
Silent = Callable[[str, float, float], float]  # (node, since, now) -> seconds it was not reporting


def never_silent(_node: str, _since: float, _now: float) -> float:
    """``silent`` for callers that know nothing of node liveness: every node always reports."""
    return 0.0


@dataclass(frozen=True)
class RolloutPlan:
    state: RolloutState | None  # None: no rollout (or an abandoned one, to clear)
    released: frozenset[str] = frozenset()  # get the rendered spec
    restore: frozenset[str] = frozenset()  # get their ``previous`` spec back (rollback)
    current: bool = False  # ``state`` is about this very rendering (not an older commit's)
    due: float | None = None  # when the verdict changes with no new report (min_healthy_s, a deadline)

    @property
    def is_held(self) -> bool:
        """The commit is not applied: its rollout is paused or rolled back."""
        return self.current and self.state is not None and self.state.state in ("paused", "rolled-back")


def plan_rollout(
    policy: UpdatePolicy,
    replicas: Sequence[ReplicaView],
    state: RolloutState | None,
    *,
    environment: str,
    service: str,
    commit: str,
    now: float,
    promote: bool = False,
    silent: Silent = never_silent,
) -> RolloutPlan:
    """The next step of ``service``'s rollout (see the module docstring)."""
    by_item = {r.item: r for r in replicas}
    # a replica with nothing published (new, or on a broker that lost its retained plane)
    # has no old spec to keep: it gets the rendered one at once and is no part of the rollout
    differing = [r for r in replicas if r.old is not None and r.old != r.new]
    if state is None or not _continues(state, by_item, differing) or _is_superseded(state, policy, commit):
        # the replicas a held rollout released that already run this spec are judged again
        # first (a new rollout from what runs would take them as done)
        carried = _carried(state, by_item)
        if not differing and not carried:  # nothing to roll out; a running rollout is abandoned
            keep = state if state is not None and not state.is_active else None
            return RolloutPlan(keep)
        changing = [*(by_item[i] for i in carried), *(r for r in differing if r.item not in carried)]
        items = tuple(r.item for r in changing)
        # what each ran when it started (a rollback, or a broker that lost the items)
        previous: dict[str, Mapping[str, str]] = {
            r.item: {"commit": r.old_commit, "digest": r.old} for r in differing if r.old and r.old_commit
        }
        if state is not None:
            previous |= {i: state.previous[i] for i in carried if i in state.previous}
        state = RolloutState(
            environment=environment,
            service=service,
            commit=commit,
            items=items,
            target={r.item: r.new for r in changing},
            waves=policy.wave_count(len(items)),
            nodes={r.item: r.node for r in changing},
            previous=previous,
            started_at=now,
        )
    if promote and state.state == "waiting-promotion":  # never before the canary waits for it
        state = replace(state, promoted=True)
    if state.is_active:
        # a released replica placement moved is a new replica on its new node: its deadline
        # starts again there (its old node's reports say nothing of it)
        moved = [i for i in state.released() if state.nodes.get(i, by_item[i].node) != by_item[i].node]
        if moved:
            state = replace(state, released_at={**state.released_at, **dict.fromkeys(moved, now)})
    state = replace(state, nodes={i: by_item[i].node for i in state.items}, updated_at=now, update=policy)
    if state.state == "rolled-back":
        return RolloutPlan(state, restore=frozenset(state.released()), current=True)
    if state.state in ("paused", "complete"):
        return RolloutPlan(state, released=frozenset(state.released()), current=True)
    return _advance(policy, state, by_item, now, silent)


def _is_superseded(state: RolloutState, policy: UpdatePolicy, commit: str) -> bool:
    """A paused or rolled-back rollout and a newer commit that changes the service's
    ``update:`` policy (a longer deadline, say): that commit's own rollout begins. One that
    changes neither the spec nor the policy (placement's, another service's) leaves it held;
    so does a state recorded without its policy (it cannot tell)."""
    held = state.state in ("paused", "rolled-back")
    return held and state.commit != commit and state.update is not None and state.update != policy


def _carried(state: RolloutState | None, by_item: dict[str, ReplicaView]) -> list[str]:
    """The replicas a held ``state`` released that are published with the spec rendered
    now (in wave order): the next rollout judges them again before it changes another."""
    if state is None or state.state not in ("paused", "rolled-back"):
        return []
    return [
        i
        for i in state.released()
        if i in by_item and by_item[i].old is not None and by_item[i].old == by_item[i].new
    ]


def _continues(state: RolloutState, by_item: dict[str, ReplicaView], differing: list[ReplicaView]) -> bool:
    """The rendering still rolls out what ``state`` does: same replicas, same targets."""
    if any(i not in by_item or by_item[i].new != state.target[i] for i in state.items):
        return False
    return all(r.item in state.target for r in differing)


def _advance(
    policy: UpdatePolicy, state: RolloutState, by_item: dict[str, ReplicaView], now: float, silent: Silent
) -> RolloutPlan:
    released_at = dict(state.released_at)
    previous = dict(state.previous)
    # on the broker with the target but not recorded (stopped between publishing the items
    # and the state): released, from now; only ever a prefix
    for item in state.items[len(state.released()) :]:
        if by_item[item].old != state.target[item]:
            break
        released_at[item] = now
    released = [i for i in state.items if i in released_at]
    healthy, failures = 0, []
    for item in released:
        view = by_item[item]
        counted = _counted(view, state.target[item], released_at[item], now, silent)
        verdict = _judge(view.actual, state.target[item], counted, policy, now)
        if verdict == "healthy":
            healthy += 1
        elif verdict != "waiting":
            failures.append(Reason(by_item[item].node, item, verdict))
    state = replace(
        state, released_at=released_at, done=healthy, wave=_wave_of(policy, len(released)), pulling=()
    )
    if failures:
        after = "rolled-back" if policy.on_failure == "rollback" else "paused"
        state = replace(state, state=after, reasons=tuple(failures))
        if after == "rolled-back":
            return RolloutPlan(state, restore=frozenset(released), current=True)
        return RolloutPlan(state, released=frozenset(released), current=True)
    if healthy < len(released):
        due = _due(policy, [by_item[i] for i in released], state, released_at, now, silent)
        return RolloutPlan(
            replace(state, state="progressing"), released=frozenset(released), current=True, due=due
        )
    if len(released) == state.total:
        return RolloutPlan(
            replace(state, state="complete", reasons=()), released=frozenset(released), current=True
        )
    if policy.canary and released and state.wave == 1 and not state.promoted:
        return RolloutPlan(
            replace(state, state="waiting-promotion"), released=frozenset(released), current=True
        )
    size = policy.wave_size(not released, state.total - len(released))
    wave = state.items[len(released) : len(released) + size]
    failed, waiting = _pull_verdicts([by_item[i] for i in wave])
    if failed:  # nothing of the wave was stopped: its old replicas run on
        after = "rolled-back" if policy.on_failure == "rollback" else "paused"
        state = replace(state, state=after, reasons=tuple(failed))
        if after == "rolled-back":
            return RolloutPlan(state, restore=frozenset(released), current=True)
        return RolloutPlan(state, released=frozenset(released), current=True)
    if waiting:  # re-evaluated when a node's status changes (no deadline: a pull may be long)
        state = replace(state, state="progressing", pulling=tuple(waiting))
        return RolloutPlan(state, released=frozenset(released), current=True)
    for item in wave:
        released_at[item] = now
        view = by_item[item]
        if item not in previous and view.old is not None and view.old_commit:
            previous[item] = {"commit": view.old_commit, "digest": view.old}
    released = [i for i in state.items if i in released_at]
    state = replace(
        state,
        state="progressing",
        released_at=released_at,
        previous=previous,
        wave=_wave_of(policy, len(released)),
    )
    return RolloutPlan(state, released=frozenset(released), current=True, due=now + policy.healthy_deadline_s)


def _pull_verdicts(views: Sequence[ReplicaView]) -> tuple[list[Reason], list[Reason]]:
    """The replicas of the next wave whose image failed to pull on their node, and those
    whose node has not reported it present yet."""
    failed, waiting = [], []
    for view in views:
        if view.image_ready:
            continue
        if view.pull == "failed":
            why = f"pull of {view.image} failed: {view.pull_error or 'no reason given'}"
            failed.append(Reason(view.node, view.item, why))
        else:
            waiting.append(Reason(view.node, view.item, f"{view.image} {view.pull or 'asked'}"))
    return failed, waiting


def _counted(view: ReplicaView, target: str, released_at: float, now: float, silent: Silent) -> float:
    """Seconds counted against the replica's ``healthy_deadline_s``: from its start on the
    new spec. Before that, nothing while its old replica still runs (its node has not taken
    the new spec yet, or is stopping the old one: a stop may take its whole grace), then
    from when its node first reported it in its present state (the old one stopped, the new
    one created); from its release when its node reports nothing of it, or an error on it
    (the new spec refused: the old one runs on). Less the time its node was not reporting."""
    actual = view.actual
    since = released_at
    if actual is not None and actual.digest == target and actual.running_since is not None:
        since = max(since, actual.running_since)
    elif actual is None or actual.error:
        pass  # nothing known of it, or its node could not take the new spec: from its release
    elif actual.digest != target and actual.state == "running":
        return 0.0  # the old replica: the new one has not started
    elif actual.state_since is not None:
        since = max(since, actual.state_since)
    return max(0.0, now - since - silent(view.node, since, now))


def _due(
    policy: UpdatePolicy,
    views: list[ReplicaView],
    state: RolloutState,
    released_at: dict[str, float],
    now: float,
    silent: Silent,
) -> float:
    """The earliest time a released replica turns healthy (``min_healthy_s`` after it was
    first seen healthy) or fails its deadline, were nothing else reported (and its node
    reporting all along)."""
    times = []
    for view in views:
        actual = view.actual
        if actual is not None and actual.healthy_since is not None:
            times.append(actual.healthy_since + policy.min_healthy_s)
        counted = _counted(view, state.target[view.item], released_at[view.item], now, silent)
        times.append(now + max(0.0, policy.healthy_deadline_s - counted))
    return min(times)


def _wave_of(policy: UpdatePolicy, released: int) -> int:
    """The wave the ``released``-th replica belongs to (0: none released)."""
    wave, covered = 0, 0
    while covered < released:
        covered += policy.wave_size(wave == 0, 1 << 30)
        wave += 1
    return wave


def _judge(actual: Observed | None, target: str, counted: float, policy: UpdatePolicy, now: float) -> str:
    """``healthy``, ``waiting``, or why the replica fails its wave (``counted``: the seconds
    of its deadline gone, see :func:`_counted`)."""
    late = counted >= policy.healthy_deadline_s
    deadline = f"{policy.healthy_deadline_s:g} s"
    if actual is None or actual.digest != target:
        if late:
            state = actual.state if actual is not None else "not reported"
            return f"not running the new spec {deadline} after {_count_start(actual)} ({state})"
        return "waiting"
    if actual.health == "unhealthy":
        return "healthcheck unhealthy"
    if (actual.restart_count or 0) >= CRASH_LOOP_RESTARTS:
        return f"crash-looping: restarted {actual.restart_count} times"
    if actual.healthy_since is not None:
        return "healthy" if now - actual.healthy_since >= policy.min_healthy_s else "waiting"
    if late and actual.running_since is None and actual.state != "running":  # created, never started
        return f"not running the new spec {deadline} after {_count_start(actual)} ({actual.state})"
    if late:
        return f"not healthy {deadline} after it started (state {actual.state}, health {actual.health})"
    return "waiting"


def _count_start(actual: Observed | None) -> str:
    """What a replica not started yet has its deadline counted from (see :func:`_counted`)."""
    return "its release" if actual is None or actual.error else "its old replica stopped"
