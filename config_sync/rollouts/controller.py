"""The rollout controller: the gate's inputs, re-evaluation, promotion and ``phrame/deploy``.

The :class:`~config_sync.intake.syncing.Syncer` asks :meth:`RolloutController.gate` for the
gate of each publication and :meth:`RolloutController.deploy_view` afterwards; config-sync's
wiring hands in its one view of the actual plane (:class:`phrame.actual.ActualView`: the
replicas' reports, healthy time on config-sync's own clock) and ``trigger(ref)``, which
queues a pass without fetching. Its own events only add a rollout's
key to a :class:`phrame.runtime.Runner`, whose sync queues the pass of the rollout's ref: a
change of a rolling service's containers at once, a deadline when due, every rollout after
``tick_s`` without one (a missed report). All state that matters is retained in the rollout
topics (read back by the gate on every pass), so this object only remembers what to
re-evaluate and what it reported. Never publishes itself.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Collection, Mapping
from typing import Any

from config_sync.models import Reading
from config_sync.publication.sender import Gate, SyncOutcome
from config_sync.reporting import CommitReporter
from config_sync.rollouts.gate import Gated, Key, gate_rollouts
from config_sync.rollouts.models import Observed
from config_sync.rollouts.promotion import Promotion, decide_promotion
from phrame.actual import ActualView, Change, ItemReport
from phrame.gitlab import GitLabError
from phrame.runtime import Runner
from schemas import Topics

log = logging.getLogger(__name__)
DEPLOY = "phrame/deploy"


class RolloutController:
    def __init__(
        self,
        topics: Topics,
        reporter: CommitReporter,
        *,
        spec_at: Callable[[str], Mapping[str, dict[str, Any]] | None],
        clock: Callable[[], float] = time.time,
        tick_s: float = 2.0,
        view: ActualView | None = None,
        node_timeout_s: float = 20.0,
    ) -> None:
        self.topics, self.reporter, self.spec_at, self.clock, self.tick_s = (
            topics,
            reporter,
            spec_at,
            clock,
            tick_s,
        )
        # the service hands in its one view (on this same clock); alone (tests), its own
        self.view = view or ActualView(topics, timeout_s=node_timeout_s, clock=clock)
        self.view.listen(self._on_change)
        self.trigger: Callable[[str], None] | None = None  # queue a pass of a ref (no fetch)
        self.active: dict[Key, str] = {}  # rollouts to re-evaluate -> the ref that publishes them
        self.promotions: dict[Key, str] = {}  # asked for (-> the commit promoted), not yet seen in a pass
        self.last: dict[Key, dict[str, Any]] = {}  # each rollout's last state, for /status
        self._reported: dict[tuple[str, str], str] = {}  # (ref, commit) -> last deploy text
        self._generations: dict[tuple[str, str], dict[str, int]] = {}  # nodes changed while rolling
        self._rolling: dict[str, str] = {}  # ref -> the commit whose deployment a rollout is
        # NOTE: the queue calls _active_keys with its own lock held: never add a key under self._lock
        self._lock = threading.Lock()
        self.runner: Runner[Key] = Runner(
            "config-sync-rollouts", self._pass_of, clock=clock, resync_s=tick_s, resync=self._active_keys
        )

    # -- the gate of a publication (worker thread)
    def gate(self, reading: Reading, environments: Collection[str]) -> Gate | None:
        """The gate for publishing ``reading`` to ``environments`` (None: nothing to gate)."""
        if reading.rendered is None:
            return None
        with self._lock:
            promote = dict(self.promotions)
            remembered = dict(self.last)

        def gate(
            rendered: Mapping[str, dict[str, Any]], published: Mapping[str, bytes], previous: Any
        ) -> Gated:
            return gate_rollouts(
                rendered,
                published,
                previous,
                topics=self.topics,
                commit=reading.sha,
                environments=environments,
                policies=reading.policies,
                observed=self.observed,
                now=self.clock(),
                spec_at=self.spec_at,
                promote=promote,
                remembered=remembered,
                silent=self.view.silent,
                prefetched=self.prefetched,
            )

        return gate

    def deploy_view(self, ref: str, outcome: SyncOutcome) -> tuple[bool, dict[str, int]]:
        """After a publication: (whether a rollout of its commit still runs or is held, the
        nodes to watch for ``phrame/deploy``: every node changed while it rolled, once it
        is complete). While it runs, ``phrame/deploy`` says which wave; held, ``failed``."""
        gated, commit = outcome.rollouts, outcome.commit
        key = (ref, commit)
        with self._lock:
            gens = self._generations.setdefault(key, {})
            for node, generation in outcome.generations.items():
                gens[node] = max(gens.get(node, 0), generation)
            states, due = [], []
            for skey, plan in (gated.plans if gated is not None else {}).items():
                if plan.state is None or not plan.current:
                    self.active.pop(skey, None)
                    if plan.state is None:  # abandoned and cleared: nothing to remember
                        self.last.pop(skey, None)
                    continue
                self.last[skey] = plan.state.to_doc()
                if plan.state.is_active:
                    self.active[skey] = ref
                    if plan.due is not None:  # its verdict changes by time alone then
                        due.append((skey, plan.due))
                else:
                    self.active.pop(skey, None)
                asked = self.promotions.get(skey)
                if asked is not None and (
                    plan.state.promoted or not plan.state.is_active or plan.state.commit != asked
                ):
                    self.promotions.pop(skey, None)
                # a rollout begun at an older commit that this head still rolls out (placement
                # committed meanwhile, a README edit) is this head's deployment now
                if plan.state.state != "complete":
                    states.append(plan.state)
            superseded = self._take_over(ref, commit)
            if not states:
                done = self._generations.pop(key, {})
                self._reported.pop(key, None)
            else:
                held = [s for s in states if not s.is_active]
                text = "; ".join(s.description() for s in (held or states))
                state = "failed" if held else "running"
                unchanged = self._reported.get(key) == f"{state}:{text}"
                self._reported[key] = f"{state}:{text}"
        for skey, at in due:
            self.runner.queue.add(skey, max(0.0, at - self.clock()))
        if superseded is not None:
            self._set(superseded, "canceled", f"superseded by {commit[:12]}", ref)
        if not states:
            return False, done
        if not unchanged:
            self._set(commit, state, text, ref)
        return True, {}

    def _take_over(self, ref: str, commit: str) -> str | None:
        """``commit`` is now ``ref``'s deployment (lock held): the nodes an older commit's
        rollout changed are watched with it; the older one, if still running, is superseded."""
        older = self._rolling.get(ref)
        self._rolling[ref] = commit
        if older is None or older == commit:
            return None
        gens = self._generations.setdefault((ref, commit), {})
        for node, generation in self._generations.pop((ref, older), {}).items():
            gens[node] = max(gens.get(node, 0), generation)
        last = self._reported.pop((ref, older), None)
        return older if last is not None and last.startswith("running:") else None

    def _set(self, commit: str, state: str, text: str, ref: str) -> None:
        log.info("rollout of %s on %s: %s (%s)", commit[:12], ref, state, text)
        try:
            self.reporter.set_status(commit, DEPLOY, state, text, ref=ref)
        except GitLabError as e:
            log.warning("could not report %s %s of %s: %s", DEPLOY, state, commit[:12], e)

    # -- promotion (HTTP and CLI)
    def promote(self, env: str, service: str, commit: object) -> Promotion:
        """Ask for ``service``'s canary to be promoted at ``commit``: taken only while its
        rollout waits for it (:func:`~config_sync.rollouts.promotion.decide_promotion`)."""
        key = (env, service)
        with self._lock:
            last = self.last.get(key) if key in self.active else None
            decided = decide_promotion(env, service, last, commit)
            if decided.commit is not None:
                self.promotions[key] = decided.commit
        if decided.commit is not None:
            self.runner.queue.add(key)
        return decided

    # -- re-evaluation
    def observed(self, node: str, item: str) -> Observed | None:
        """A replica's container as its node reports it (the gate's input)."""
        return observed_of(self.view.report(node, "containers", item))

    def prefetched(self, node: str) -> Mapping[str, Any] | None:
        """What ``node`` reports of the images it pulls ahead (its status's ``prefetch``;
        None: its agent does not pull ahead, or nothing is known of it)."""
        facts = self.view.facts(node)
        status = facts.status if facts is not None else None
        found = status.get("prefetch") if status is not None else None
        return found if isinstance(found, Mapping) else None

    def _on_change(self, change: Change) -> None:
        """The view's listener (MQTT network thread): a rolling service's container changed
        in what the gate reads, or a node's status (what it pulled ahead of a wave): add
        its key. Only enqueues; never raises."""
        if change.what == "status" and change.status is not None and "prefetch" in change.status:
            with self._lock:
                waiting = [k for k, doc in self.last.items() if k in self.active and doc.get("pulling")]
            for key in waiting:
                self.runner.queue.add(key)
            return
        if change.what != "item" or change.kind != "containers" or change.item_id is None:
            return
        if observed_of(change.item) == observed_of(change.previous):
            return  # changed in nothing the gate reads
        env, service = change.item_id.split(".")[:2]
        with self._lock:
            rolling = (env, service) in self.active
        if rolling:
            self.runner.queue.add((env, service))

    def _active_keys(self) -> list[Key]:
        with self._lock:
            return list(self.active)

    def _pass_of(self, key: Key) -> None:
        """The runner's sync: queue a pass of the ref that publishes ``key``'s rollout (which
        computes its next deadline); nothing if it ended meanwhile."""
        with self._lock:
            ref = self.active.get(key)
        if ref is not None and self.trigger is not None:
            self.trigger(ref)

    def start(self) -> None:
        self.runner.start()

    def stop(self) -> None:
        self.runner.stop(5)


def observed_of(report: ItemReport | None) -> Observed | None:
    if report is None:
        return None
    return Observed(
        report.text("digest"),
        report.text("state"),
        report.text("health"),
        report.restart_count,
        report.healthy_since,
        report.started_at,
        report.running_since,
        report.state_since,
        report.text("error"),
    )
