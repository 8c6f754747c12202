"""Keeping each environment's last deployments retained at ``<prefix>/desired/environments/<env>/deploys``.

Wiring around the pure :mod:`config_sync.deploys.records`: the sync pass calls
:meth:`DeployHistory.record` after a valid publication (author and message read from git,
never from a webhook), the deploy watcher's thread calls :meth:`DeployHistory.check` each
tick with the node statuses it holds and its judge of a record's health (the one health
function, :func:`phrame.actual.health.assess`, as for ``phrame/deploy``): every pending
record, and each environment's newest record after it finished (its health followed). The
broker is the store: at start config-sync reads the retained lists back (:meth:`restore`)
before it publishes anything, so a restart keeps the history, and a record left pending by
the previous run is judged again (converged, failed at a new deadline, or superseded by the
next commit). It writes only ``deploys``.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import replace
from typing import Any

from config_sync.deploys import records
from config_sync.deploys.records import DeployRecord
from config_sync.publication.sender import Sender, SyncOutcome
from config_sync.retained import env_payloads
from phrame.actual.health import Health
from phrame.git import GitError
from phrame.mqtt import MqttError
from schemas import Topics, canonical_json

log = logging.getLogger(__name__)


class DeployHistory:
    def __init__(
        self,
        broker: Sender,
        topics: Topics,
        commit_info: Callable[[str], tuple[str, str]],
        *,
        timeout_s: float,
        wall: Callable[[], float] = time.time,
    ) -> None:
        self.broker, self.topics, self.commit_info = broker, topics, commit_info
        self.timeout_s, self.wall = timeout_s, wall
        self.by_env: dict[str, list[DeployRecord]] = {}
        self.deadlines: dict[tuple[str, str], float] = {}  # (env, commit) of a pending record
        self.dirty: set[str] = set()  # environments whose topic must be (re)published
        # env -> its staged rollouts not complete (the gate's word at the last publication)
        self.held: dict[str, list[dict[str, Any]]] = {}
        self.restored = False
        self.annotations: dict[str, dict[str, Any]] = {}  # commit -> plan_changed (the merge check)
        self._resend = False  # every list to be sent again (after a reconnect)
        # told of each record that stops being pending here (metrics); must not raise
        self.on_finished: Callable[[str, DeployRecord], None] | None = None
        # a record's health word changed (the record, the word before): a pending one's
        # (suspended: waiting for a promotion), or the newest finished one's (followed)
        self.on_health: Callable[[str, DeployRecord, str], None] | None = None
        # told of every record made, superseded or judged (under the lock: they only note)
        self.watchers: list[Callable[[str, DeployRecord], None]] = []
        # True while a publication runs: the newest finished deployment is not followed then
        # (the one being published supersedes it; judging it again on every tick took a
        # third of config-sync's samples during a 10,000-node push, beside the publication)
        self.busy: Callable[[], bool] = lambda: False
        # (env, commit) -> who approved it (config_sync.approvals), for a new record
        self.approvals_of: Callable[[str, str], tuple[dict[str, Any], ...]] | None = None
        self._lock = threading.RLock()  # held while publishing too: never an older list after a newer

    def restore(self, published: Mapping[str, bytes]) -> None:
        """Read the retained lists back (``published``: the desired plane as the broker holds
        it). A pending record gets a full deadline from now: its nodes may have converged
        while config-sync was away, which their retained statuses say within a tick."""
        now = self.wall()
        with self._lock:
            deploys = env_payloads(
                published, self.topics, "deploys", "desired-deploys", invalid="its history starts again"
            )
            for env, doc in deploys:
                self.by_env[env] = records.records_of(doc)
                for r in self.by_env[env]:
                    if r.is_pending:
                        self.deadlines[(env, r.commit)] = now + self.timeout_s
            self.restored = True
        log.info("read back the deployments of %d environment(s)", len(self.by_env))

    def record(self, outcome: SyncOutcome, *, unassigned: Collection[str] = ()) -> None:
        """A record per environment whose desired state ``outcome`` changed (``unassigned``:
        the commit's replicas no node is assigned to). An invalid commit is no deployment
        (its errors are in the ``sync`` topic): nothing is recorded. A later publication of
        the same commit (a staged rollout's next wave) adds its nodes and replicas."""
        if not self.restored or not outcome.ok:
            return
        gated = outcome.rollouts
        waves: dict[str, list[dict[str, Any]]] = {}
        # replaced whole, not under the lock (a flush may hold it while the broker is away)
        held = {
            env: list(gated.held.get(env, [])) if gated is not None else [] for env in outcome.environments
        }
        self.held = {**self.held, **held}
        for (env, _service), plan in sorted(gated.plans.items()) if gated is not None else ():
            if plan.state is not None and plan.current:
                waves.setdefault(env, []).append(plan.state.to_doc())
        if not outcome.messages:
            return
        changed, gone = records.deployed_environments(outcome.messages, outcome.generations, self.topics)
        placed = records.deployed_replicas(outcome.messages, self.topics, sorted(unassigned))
        for env in placed:
            if env in outcome.environments and env not in gone:
                changed.setdefault(env, {})
        if not changed and not gone:
            return
        author, message = self._describe(outcome.commit) if changed else ("", "")
        now = self.wall()
        with self._lock:
            for env in gone:
                if self.by_env.pop(env, None) is not None:
                    self.dirty.add(env)
            for env, nodes in changed.items():
                new = DeployRecord(
                    outcome.commit, outcome.ref, author, message, now, nodes,
                    replicas=placed.get(env, {}), waves=records.waves_of(waves.get(env, [])),
                    approvals=self.approvals_of(env, outcome.commit) if self.approvals_of else (),
                    plan_changed=self.annotations.get(outcome.commit),
                )  # fmt: skip
                before = self.by_env.get(env, [])
                after = records.add(before, new)
                if after != before:
                    self.by_env[env] = after
                    for made in (r for r in after if r not in before):
                        self._tell(env, made)
                    self.deadlines[(env, outcome.commit)] = now + self.timeout_s
                    self.dirty.add(env)
            self.flush()

    def deployment_of(self, ref: str, commit: str, envs: Collection[str]) -> DeployRecord | None:
        """``commit``'s deployment by ``ref`` to ``envs`` as recorded (nodes and replicas of all
        its records, the earliest publication), to follow it again after a restart; None when
        none is recorded, or one of them failed or degraded (that verdict was reported)."""
        key = (commit, ref)
        with self._lock:
            found = [r for env in envs for r in self.by_env.get(env, ()) if (r.commit, r.ref) == key]
        if not found or any(r.state not in (records.PENDING, records.CONVERGED) for r in found):
            return None
        nodes: dict[str, int] = {}
        replicas: dict[str, str | None] = {}
        for r in found:
            for node, generation in r.nodes.items():
                nodes[node] = max(nodes.get(node, 0), generation)
            replicas |= r.replicas
        first = min(found, key=lambda r: r.published_at)
        return replace(first, nodes=nodes, replicas=replicas)

    def annotate(self, commit: str, plan_changed: dict[str, Any]) -> None:
        """Every record of ``commit``, made or to be made, carries ``plan_changed``."""
        with self._lock:
            self.annotations[commit] = plan_changed
            while len(self.annotations) > 50:
                del self.annotations[next(iter(self.annotations))]
            for env, recs in self.by_env.items():
                for i, r in enumerate(recs):
                    if r.commit == commit and r.plan_changed != plan_changed:
                        recs[i] = replace(r, plan_changed=plan_changed)
                        self.dirty.add(env)
            self.flush()

    def _describe(self, commit: str) -> tuple[str, str]:
        try:
            return self.commit_info(commit)
        except GitError as e:  # the record still says what was deployed and when
            log.warning("cannot read the author and message of %s: %s", commit[:12], e)
            return "", ""

    def check(
        self,
        statuses: Mapping[str, dict[str, Any]],
        ceilings: Mapping[str, int],
        offline: Callable[[Iterable[str]], Mapping[str, str]],
        health: Callable[[str, DeployRecord, list[dict[str, Any]]], Health] | None = None,
    ) -> None:
        """Judge every pending record and follow each environment's newest finished one;
        publish the lists that changed (or failed to go out).
        ``health(env, record, rollouts)``: the record's health (``rollouts``: the environment's
        staged rollouts not complete); without it, only whether its nodes converged."""
        if not self.restored:
            return
        now = self.wall()
        with self._lock:
            for env, recs in self.by_env.items():
                for i, r in enumerate(recs):
                    if not r.is_pending:
                        continue
                    deadline = self.deadlines.get((env, r.commit), now)
                    down = offline(r.nodes)
                    held = self.held.get(env, [])
                    judged = records.judge(
                        r, statuses, now=now, deadline=deadline, ceilings=ceilings, offline=down,
                        health=health(env, r, held) if health is not None else None,
                    )  # fmt: skip
                    if judged is not r:
                        recs[i] = judged
                        self.dirty.add(env)
                        log.info("deployment of %s to %s: %s", r.commit[:12], env, judged.state)
                        self._tell(env, judged)
                        if not judged.is_pending:
                            if self.on_finished is not None:
                                self.on_finished(env, judged)
                        elif self.on_health is not None and judged.health != r.health:
                            self.on_health(env, judged, r.health)
                self._follow(env, recs, health)
            self.deadlines = {k: v for k, v in self.deadlines.items() if self._is_pending(*k)}
            self.flush()

    def _follow(
        self,
        env: str,
        recs: list[DeployRecord],
        health: Callable[[str, DeployRecord, list[dict[str, Any]]], Health] | None,
    ) -> None:
        """The environment's newest deployment, once finished, is judged on every tick too
        (but not while a publication runs: :attr:`busy`): a new verdict word (degraded long
        after it converged, healthy again) goes into the record (so a restart knows it) and
        to ``on_health``."""
        newest = recs[0] if recs else None
        if health is None or newest is None or newest.is_pending or self.busy():
            return
        followed = records.follow(newest, health(env, newest, self.held.get(env, [])))
        if followed is newest:
            return
        recs[0] = followed
        self.dirty.add(env)
        log.info(
            "%s at %s, deployed before: %s → %s", env, newest.commit[:12], newest.health, followed.health
        )
        if self.on_health is not None:
            self.on_health(env, followed, newest.health)

    def _tell(self, env: str, record: DeployRecord) -> None:
        for watcher in self.watchers:
            try:
                watcher(env, record)
            except Exception:  # a watcher's bug never stops the deploy records
                log.exception("a watcher of the deployments failed on %s at %s", env, record.commit[:12])

    def _is_pending(self, env: str, commit: str) -> bool:
        return any(r.commit == commit and r.is_pending for r in self.by_env.get(env, ()))

    def republish(self) -> None:
        """After a reconnect (the broker may have lost its retained topics): send every list
        again, at the next flush. Called on the MQTT network thread: it never waits for the
        lock, which a flush holds while it waits for that very thread's acknowledgements."""
        self._resend = True

    def flush(self) -> None:
        with self._lock:
            if self._resend:
                self._resend = False
                self.dirty |= set(self.by_env)
            if not self.dirty:
                return
            batch: list[tuple[str, bytes | None]] = []
            for env in sorted(self.dirty):
                recs = self.by_env.get(env)
                body = canonical_json(records.payload(env, recs)) if recs is not None else None
                batch.append((self.topics.env_deploys(env), body))
            try:
                self.broker.publish_batch(batch)
            except MqttError as e:  # kept dirty: the next tick sends them again
                log.warning("could not publish the deployments of %d environment(s): %s", len(batch), e)
                return
            self.dirty.clear()
