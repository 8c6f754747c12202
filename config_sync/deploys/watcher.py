"""Closing the loop after a publish: commit status ``phrame/deploy`` follows the agents.

The sync pass calls :meth:`DeployWatcher.watch` with the nodes whose manifest changed
(:meth:`DeployWatcher.unchanged` for a new commit that changed none; :meth:`DeployWatcher.resume`
for the head an earlier run published, after a restart or a takeover);
the watcher follows each node's ``actual/.../status`` through config-sync's one view of the
actual plane (:class:`phrame.actual.ActualView`, told of each status change)
and the replicas' reports, and placement's ``placement`` topics (:meth:`on_placement`), and
judges the deployment with the one health function (:func:`phrame.actual.health.assess`):
``success`` when healthy (every node converged on its manifest generation or a later one,
every replica it wants running as desired), ``failed`` as soon as it is failed (an error a
node reported since the publication: a pull, create or mount error, a port taken) or
degraded (a replica unassigned, crash-looping or unhealthy), and ``failed`` with the node and
its error after ``PHRAME_DEPLOY_TIMEOUT_S`` of anything else. A newer deploy of the same ref
cancels the older one. Callbacks only store; the watcher thread decides.
While it runs, the description names the nodes it waits on that the view judges offline
(the shared node-health rule: heartbeats older than ``PHRAME_NODE_TIMEOUT_S`` on this
receiver's clock, or a will), re-reported when that set changes; the timeout stays.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from config_sync.deploys.history import DeployHistory
from config_sync.deploys.records import DeployRecord
from config_sync.deploys.verdict import failure, is_converged, waiting_for, waiting_text
from config_sync.reporting import CommitReporter
from phrame.actual import ActualView, Change
from phrame.actual.health import (
    DEGRADED,
    FAILED,
    HEALTHY,
    PROGRESSING,
    Health,
    NodeSeen,
    Replica,
    assess,
    is_passing,
)
from phrame.gitlab import GitLabError
from phrame.runtime import BackgroundLoop
from schemas import PayloadError, Topics, check_payload, load_json

log = logging.getLogger(__name__)
NAME = "phrame/deploy"
MAX_FAILING = 1000  # deployments whose failure is being held, remembered
CHECK_DUTY_GAP = 4.0  # the pause after a check, in units of its CPU: checks use ≤ 20 % of a core


@dataclass
class Deployment:
    ref: str
    commit: str
    nodes: dict[str, int]  # node -> the manifest generation published for ``commit``
    deadline: float
    offline: frozenset[str] = frozenset()  # the waited-on nodes offline when last reported
    replicas: tuple[Replica, ...] = ()  # the container replicas it gave a spec, and those unassigned
    since: float = 0.0  # when it began, on the view's clock (a report older than this is no news)
    health: str = ""  # the health word last reported
    # ``running`` reported: only then may a tick finish it, or its success could be
    # followed by that late ``running`` (nodes already converged when the watch starts)
    announced: bool = False


class DeployWatcher:
    def __init__(
        self,
        reporter: CommitReporter,
        topics: Topics,
        *,
        timeout_s: float,
        clock: Callable[[], float] = time.monotonic,
        tick_s: float = 0.2,
        node_timeout_s: float = 20.0,
        wall: Callable[[], float] = time.time,
        view: ActualView | None = None,
        settle_s: float = 0.0,
    ) -> None:
        """``settle_s``: how long a replica must have run (healthy, without a restart) on
        config-sync's clock to count as healthy, so a crash loop shows before ``success``;
        and how long a failure must hold before it fails the deployment, so what the agent
        mends on its own (a dependency still starting after a daemon restart) does not."""
        self.reporter, self.topics, self.timeout_s = reporter, topics, timeout_s
        self.clock, self.tick_s, self.wall, self.settle_s = clock, tick_s, wall, settle_s
        # (commit, its nodes) -> since when it has been failed or degraded (view's clock)
        self._failing_since: dict[tuple[str, frozenset[str]], float] = {}
        # the service hands in its one view; alone (tests), the watcher keeps its own
        self.view = view or ActualView(topics, timeout_s=node_timeout_s, clock=clock, wall=wall)
        self.view.listen(self.on_change)
        self.statuses: dict[str, dict[str, Any]] = {}
        self.status_at: dict[str, float] = {}  # node -> when its status last changed (view's clock)
        self.placement: dict[str, dict[str, Any]] = {}  # env -> placement's retained state
        # the highest generation each node ever reported applied, kept when its status is
        # cleared: the publisher never numbers a manifest at or below it (after a broker lost
        # the manifests and config-sync its memory, agents still remember)
        self.applied: dict[str, int] = {}
        self.published: dict[str, int] = {}  # node -> highest generation watched since start
        self.active: dict[str, Deployment] = {}  # by ref
        self.finished: list[tuple[str, str, str]] = []  # (commit, state, description)
        self.remarks: dict[str, str] = {}  # commit -> said first in its phrame/deploy (the merge check)
        self.history: DeployHistory | None = None  # judged on every tick too (``deploys`` topics)
        self._lock = threading.RLock()  # check() judges with it held: health_of takes it again
        # the watcher thread: a check every tick_s, and at once when a callback stored news
        self._next_check_at = 0.0  # monotonic: no check before (see _tick)
        self._loop = BackgroundLoop(
            "config-sync-deploy", self._tick, wait_first_s=tick_s, error_wait_s=tick_s
        )

    def on_change(self, change: Change) -> None:
        """The view's listener (MQTT network thread): store a node's status; never raises."""
        if change.what != "status":
            return
        node, doc = change.node, change.status
        with self._lock:
            if doc is None:
                self.statuses.pop(node, None)
            else:
                self.statuses[node] = dict(doc)
                self.status_at[node] = self.view.clock()
                generation = doc.get("generation")
                if isinstance(generation, int) and not isinstance(generation, bool):
                    self.applied[node] = max(self.applied.get(node, 0), generation)
            self._news()

    def _news(self) -> None:
        """Wake the watcher thread for news, unless it is pausing after a check (the duty
        gap: it checks when that ends anyway): at 10,000 nodes a status a few hundred
        microseconds apart each woke it only to wait again."""
        if time.monotonic() >= self._next_check_at:
            self._loop.wake()

    def on_placement(self, msg: Any) -> None:
        """MQTT callback: placement's retained state of an environment (which replicas no
        node can take, and why); an invalid one is ignored. Never raises."""
        try:
            parsed = self.topics.parse(msg.topic)
            doc = load_json(msg.payload) if msg.payload else None
            if doc is not None:
                check_payload("desired-placement", doc)
        except (ValueError, PayloadError) as e:
            log.debug("ignoring placement's state on %s: %s", msg.topic, e)
            return
        if parsed.kind != "placement" or parsed.environment is None:
            return
        with self._lock:
            if doc is None:
                self.placement.pop(parsed.environment, None)
            else:
                self.placement[parsed.environment] = dict(doc)
            self._news()

    def health_of(
        self,
        commit: str,
        nodes: Mapping[str, int],
        replicas: tuple[Replica, ...] = (),
        *,
        since: float,
        rollouts: list[dict[str, Any]] | None = None,
    ) -> Health:
        """The health of ``commit`` on ``nodes`` (node -> its generation) and ``replicas``,
        begun at ``since`` (the view's clock): what the nodes reported before counts for
        nothing but convergence."""
        verdicts = self.view.verdicts(nodes)
        with self._lock:
            statuses, status_at = dict(self.statuses), dict(self.status_at)
            placement = dict(self.placement)
            top = dict(self.published)
        seen = {}
        for node, generation in nodes.items():
            status = statuses.get(node) or {}
            converged = is_converged(status, commit, generation, top.get(node))
            errors: tuple[str, ...] = ()
            if not converged and status_at.get(node, since - 1) >= since:
                errors = tuple(_error_text(e) for e in status.get("errors") or ())
            at = f"{str(status.get('commit'))[:12]}, generation {status.get('generation')}" if status else ""
            v = verdicts[node]
            seen[node] = NodeSeen(v.state, v.reason, converged, errors, at)
        reports, fresh, settled = {}, set(), set()
        now = self.view.clock()
        for r in replicas:
            report = self.view.report(r.node, "containers", r.replica) if r.node else None
            if report is not None:
                reports[r.replica] = report.doc
                if report.received_at >= since:
                    fresh.add(r.replica)
                if report.healthy_since is not None and now - report.healthy_since >= self.settle_s:
                    settled.add(r.replica)
        unassigned = {}
        for env in {r.replica.split(".", 1)[0] for r in replicas if r.node is None}:
            for u in (placement.get(env) or {}).get("unassigned") or ():
                if isinstance(u, Mapping) and "replica" in u:
                    unassigned[f"{env}.{u['replica']}" if u["replica"].count(".") < 2 else u["replica"]] = (
                        str(u.get("reason", ""))
                    )
        health = assess(
            replicas,
            seen,
            reports,
            fresh=fresh,
            unassigned=unassigned,
            rollouts=rollouts or (),
            settled=settled,
        )
        # a node whose last status says its daemon is away (or its disk full): what its items
        # say is from before (a pass the outage cut short); counted once it reports again
        troubled = {
            n for n, st in statuses.items() if any(is_passing(_error_text(e)) for e in st.get("errors") or ())
        }
        away = sorted(({r.node for r in replicas if r.node} | set(nodes)) & troubled)
        key = (commit, frozenset(nodes) | {r.replica for r in replicas})
        return self._held(health, key, now, away=away)

    def _held(
        self, health: Health, key: tuple[str, frozenset[str]], now: float, *, away: list[str]
    ) -> Health:
        """``health``, but a failure only once it held for ``settle_s`` (until then the
        deployment is progressing, the failure its reason), and never while a node of it
        reports trouble of its own (``away``): the count starts over when it reports again."""
        if health.state in (FAILED, DEGRADED) and away:
            with self._lock:
                self._failing_since.pop(key, None)
            note = (
                f"({health.state}; held while {', '.join(away)} reports its Docker daemon away or disk full)"
            )
            return Health(PROGRESSING, tuple(replace(r, reason=f"{r.reason} {note}") for r in health.reasons))
        if health.state not in (FAILED, DEGRADED):
            with self._lock:
                self._failing_since.pop(key, None)
            return health
        with self._lock:
            since = self._failing_since.setdefault(key, now)
            if len(self._failing_since) > MAX_FAILING:  # deployments come and go: the oldest goes
                del self._failing_since[next(iter(self._failing_since))]
        if now - since >= self.settle_s:
            return health
        held = f"for {now - since:.1f} s of {self.settle_s:g}"
        return Health(
            PROGRESSING,
            tuple(replace(r, reason=f"{r.reason} ({health.state} {held})") for r in health.reasons),
        )

    def record_health(self, env: str, record: DeployRecord, rollouts: list[dict[str, Any]]) -> Health:
        """The health of a ``deploys`` record (``DeployHistory.check``'s judge)."""
        since = self.view.clock() - max(0.0, self.wall() - record.published_at)
        replicas = tuple(Replica(item, node) for item, node in sorted(record.replicas.items()))
        return self.health_of(record.commit, record.nodes, replicas, since=since, rollouts=rollouts)

    def note_published(self, generations: Mapping[str, int]) -> None:
        """Manifests published (node -> generation), watched or not (a staged rollout's
        waves): a status at or below them is news of this run, not of one before a restart."""
        with self._lock:
            for node, generation in generations.items():
                self.published[node] = max(self.published.get(node, 0), generation)

    def applied_generations(self) -> dict[str, int]:
        """Node -> the highest manifest generation it reported applied (a copy)."""
        with self._lock:
            return dict(self.applied)

    def watch(
        self, ref: str, commit: str, nodes: Mapping[str, int], replicas: tuple[Replica, ...] = ()
    ) -> None:
        """Follow ``commit`` of ``ref`` on ``nodes`` (node -> its published manifest generation)
        and ``replicas`` (the container replicas it gave a spec; node ``None``: unassigned)."""
        replicas = tuple(dict.fromkeys(replicas))  # one each (an older deployment's and the commit's own)
        if not nodes and not replicas:
            return
        since, deadline = self.view.clock(), self.clock() + self.timeout_s
        with self._lock:
            for node, generation in nodes.items():
                self.published[node] = max(self.published.get(node, 0), generation)
            older = self.active.pop(ref, None)
            if older is not None and older.commit == commit:
                # the same commit published again (a read-back re-sent what a broker node lost,
                # one generation up): still the same deployment, its other nodes still waited on
                merged = dict(older.nodes)
                for node, generation in nodes.items():
                    merged[node] = max(merged.get(node, 0), generation)
                nodes = merged
                replicas = tuple(dict.fromkeys((*older.replicas, *replicas)))
                since, deadline = older.since, older.deadline
            self.active[ref] = Deployment(
                ref, commit, dict(sorted(nodes.items())), deadline, replicas=replicas, since=since,
            )  # fmt: skip
            self._loop.wake()
        if older is not None and older.commit != commit:
            self._report(older.commit, "canceled", f"superseded by {commit[:12]}", ref)
        offline = self.view.offline(nodes)
        with self._lock:
            if (dep := self.active.get(ref)) is not None and dep.commit == commit:
                dep.offline = frozenset(offline)
        text = waiting_text(sorted(nodes), offline) if nodes else ""
        if not nodes or any(r.node is None for r in replicas):
            unplaced = ", ".join(r.replica for r in replicas if r.node is None)
            text = "; ".join(t for t in (text, f"waiting for placement to assign {unplaced}") if t)
        self._report(commit, "running", text, ref)
        with self._lock:
            if (dep := self.active.get(ref)) is not None and dep.commit == commit:
                dep.announced = True
        self.check()

    def unchanged(self, ref: str, commit: str, unassigned: tuple[Replica, ...] = ()) -> None:
        """``commit`` of ``ref`` changed no node's desired state (no manifest published): it
        is deployed as soon as what it builds on is, so at once, unless the ref's previous
        deployment is still converging (then it takes that one over: same nodes) or a
        replica it wants has no node (``unassigned``: then it waits for placement)."""
        with self._lock:
            older = self.active.get(ref)
        if older is not None and older.commit != commit:
            self.watch(ref, commit, older.nodes, (*older.replicas, *unassigned))
            return
        if unassigned:
            self.watch(ref, commit, {}, unassigned)
            return
        text = "nothing to change: no node's desired state changed"
        self.finished.append((commit, "success", text))
        self._report(commit, "success", text, ref)

    def resume(
        self,
        ref: str,
        commit: str,
        nodes: Mapping[str, int],
        replicas: tuple[Replica, ...] = (),
        *,
        published_at: float,
    ) -> None:
        """Follow again ``commit``'s deployment that an earlier run published (wall clock
        ``published_at``) and reported: after a restart or a takeover, the head found
        published already. Judged as :meth:`watch` judges, begun at its publication; no
        ``running`` again (the earlier run said it): its verdict is reported once it has one."""
        since = self.view.clock() - max(0.0, self.wall() - published_at)
        with self._lock:
            if ref in self.active:  # this run watches a deployment of the ref already
                return
            for node, generation in nodes.items():
                self.published[node] = max(self.published.get(node, 0), generation)
            self.active[ref] = Deployment(
                ref, commit, dict(sorted(nodes.items())), self.clock() + self.timeout_s,
                replicas=tuple(dict.fromkeys(replicas)), since=since, announced=True,
            )  # fmt: skip
            self._loop.wake()
        self.check()

    def check(self) -> None:
        """Finish every deployment that converged or timed out (the thread calls this)."""
        done: list[tuple[Deployment, str, str]] = []
        running: list[tuple[Deployment, str]] = []  # whose offline nodes changed
        with self._lock:
            now = self.clock()
            for ref, dep in list(self.active.items()):
                if not dep.announced:  # watch() is still reporting it running
                    continue
                offline = self.view.offline(dep.nodes)
                health = self.health_of(dep.commit, dep.nodes, dep.replicas, since=dep.since)
                state = health.deploy_status
                if health.state == HEALTHY:
                    text = f"{len(dep.nodes)} node(s) converged on {dep.commit[:12]}"
                    if dep.replicas:
                        text += f", {len(dep.replicas)} replica(s) running"
                elif state == "failed":
                    text = _failed_text(health)
                elif now >= dep.deadline:
                    text = failure(self.statuses, dep.commit, dep.nodes, self.published, offline)
                    if text == "converged":
                        text = _failed_text(health)
                    state = "failed"
                if state != "running":
                    del self.active[ref]
                    done.append((dep, state, text))
                    continue
                waiting = waiting_for(self.statuses, dep.commit, dep.nodes, self.published)
                text = waiting_text(waiting, offline) if waiting else _failed_text(health)
                waited_offline = frozenset(n for n in waiting if n in offline)
                if waited_offline != dep.offline or health.state != dep.health:
                    changed_word = dep.health not in ("", health.state)
                    dep.offline, dep.health = waited_offline, health.state
                    if waited_offline or changed_word:
                        running.append((dep, text))
        for dep, text in running:
            self._report(dep.commit, "running", text, dep.ref)
        for dep, state, text in done:
            self.finished.append((dep.commit, state, text))
            self._report(dep.commit, state, text, dep.ref)
        if self.history is not None:
            with self._lock:
                statuses, ceilings = dict(self.statuses), dict(self.published)
            self.history.check(statuses, ceilings, self.view.offline, self.record_health)

    def remark(self, commit: str, text: str, ref: str) -> None:
        """Say ``text`` first in every ``phrame/deploy`` of ``commit`` from now on; one that
        finished already is reported again with it."""
        with self._lock:
            self.remarks[commit] = text
            while len(self.remarks) > 50:
                del self.remarks[next(iter(self.remarks))]
            done = [(state, said) for c, state, said in self.finished if c == commit]
        if done:
            self._report(commit, done[-1][0], done[-1][1], ref)

    def _report(self, commit: str, state: str, text: str, ref: str) -> None:
        remark = self.remarks.get(commit)
        if remark:
            text = f"{remark}; {text}" if text else remark
        log.info("deploy of %s on %s: %s (%s)", commit[:12], ref, state, text)
        # never raises: check() reports each finished deployment on its own, so one failed
        # report cannot leave the others (already out of ``active``) "running" forever
        try:
            self.reporter.set_status(commit, NAME, state, text, ref=ref)
        except GitLabError as e:  # the adapter's own error; anything else is a bug and is raised
            log.warning("could not report deploy %s of %s: %s", state, commit[:12], e)

    def start(self) -> None:
        self._loop.start()

    def stop(self) -> None:
        self._loop.stop(5)

    def _tick(self) -> float:
        # news wakes the loop at once, and a check judges every node of every deployment: at
        # 10,000 nodes back-to-back checks held a core (and the GIL, so config-sync's MQTT
        # thread left PUBACKs unread past its 30 s). A check waits CHECK_DUTY_GAP times the
        # CPU the last one took (nothing at a few hundred nodes, where a check is milliseconds)
        left = self._next_check_at - time.monotonic()
        if left > 0:
            return left
        cpu = time.thread_time()
        self.check()
        cost = time.thread_time() - cpu
        self._next_check_at = time.monotonic() + CHECK_DUTY_GAP * cost
        return max(self.tick_s, CHECK_DUTY_GAP * cost)


def _error_text(error: Any) -> str:
    return str(error.get("message", error)) if isinstance(error, Mapping) else str(error)


def _failed_text(health: Health) -> str:
    """``edge-01: pull ...: not found`` (failed), ``degraded: prod.api.0: unassigned: ...``."""
    first = health.reasons[0].text() if health.reasons else "no reason given"
    return first if health.state == "failed" else f"{health.state}: {first}"
