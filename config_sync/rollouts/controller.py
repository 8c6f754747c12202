"""The rollout controller: the gate's inputs, re-evaluation, promotion and ``phrame/deploy``.

The :class:`~config_sync.intake.syncing.Syncer` asks :meth:`RolloutController.gate` for the gate of
each publication and :meth:`RolloutController.deploy_view` afterwards; config-sync's wiring
subscribes :attr:`RolloutController.actual` to the nodes' containers and hands in
``trigger(ref)``, which queues a pass without fetching. A change of a rolling service's
containers triggers a pass at once, and a timer (``tick_s``) covers deadlines. All state that
matters is retained in the rollout topics (read back by the gate on every pass), so this
object only remembers what to re-evaluate and what it reported. Never publishes itself.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Collection, Mapping
from typing import Any

from config_sync.errors import GitLabError
from config_sync.gitlab_api import CommitReporter
from config_sync.models import Reading
from config_sync.publication.sender import Gate, SyncOutcome
from config_sync.rollouts.actual_watch import ActualWatch
from config_sync.rollouts.gate import Gated, Key, gate_rollouts
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
        node_timeout_s: float = 20.0,
    ) -> None:
        self.topics, self.reporter, self.spec_at, self.clock, self.tick_s = (
            topics,
            reporter,
            spec_at,
            clock,
            tick_s,
        )
        # node_timeout_s: how long a node is taken as reporting after its last message
        self.actual = ActualWatch(
            topics, clock=clock, on_change=self._on_actual, node_timeout_s=node_timeout_s
        )
        self.trigger: Callable[[str], None] | None = None  # queue a pass of a ref (no fetch)
        self.active: dict[Key, str] = {}  # rollouts to re-evaluate -> the ref that publishes them
        self.promotions: set[Key] = set()  # asked for, not yet seen in a pass
        self.due: dict[Key, float | None] = {}  # when a rollout's verdict changes by time alone
        self.last: dict[Key, dict[str, Any]] = {}  # each rollout's last state, for /status
        self._reported: dict[tuple[str, str], str] = {}  # (ref, commit) -> last deploy text
        self._generations: dict[tuple[str, str], dict[str, int]] = {}  # nodes changed while rolling
        self._rolling: dict[str, str] = {}  # ref -> the commit whose deployment a rollout is
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # -- the gate of a publication (worker thread)
    def gate(self, reading: Reading, environments: Collection[str]) -> Gate | None:
        """The gate for publishing ``reading`` to ``environments`` (None: nothing to gate)."""
        if reading.rendered is None:
            return None
        with self._lock:
            promote = set(self.promotions)
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
                observed=self.actual.observed,
                now=self.clock(),
                spec_at=self.spec_at,
                promote=promote,
                remembered=remembered,
                silent=self.actual.silent,
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
            states = []
            for skey, plan in (gated.plans if gated is not None else {}).items():
                if plan.state is None or not plan.current:
                    self.active.pop(skey, None)
                    if plan.state is None:  # abandoned and cleared: nothing to remember
                        self.last.pop(skey, None)
                    continue
                self.last[skey] = plan.state.to_doc()
                if plan.state.is_active:
                    self.active[skey] = ref
                    self.due[skey] = plan.due
                else:
                    self.active.pop(skey, None)
                if skey in self.promotions and (plan.state.promoted or not plan.state.is_active):
                    self.promotions.discard(skey)
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
    def promote(self, env: str, service: str) -> tuple[bool, str]:
        """Ask for ``service``'s canary to be promoted; (accepted, why)."""
        key = (env, service)
        with self._lock:
            ref = self.active.get(key)
            last = self.last.get(key)
            if ref is None or last is None:
                state = last["state"] if last else "no rollout"
                return False, f"{env}/{service}: nothing to promote ({state})"
            self.promotions.add(key)
        if self.trigger is not None:
            self.trigger(ref)
        return True, f"{env}/{service}: promotion of {str(last['commit'])[:12]} queued"

    # -- re-evaluation
    def _on_actual(self, env: str, service: str) -> None:
        with self._lock:
            ref = self.active.get((env, service))
        if ref is not None and self.trigger is not None:
            self.trigger(ref)

    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, name="config-sync-rollouts", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5)

    def _loop(self) -> None:
        # a pass when a rollout's verdict is due (min_healthy_s over, a deadline), checked
        # every 50 ms; every ``tick_s`` every running rollout anyway (a missed report)
        last_tick = self.clock()
        while not self._stop.wait(0.05):
            now = self.clock()
            with self._lock:
                due = [k for k, at in self.due.items() if at is not None and at <= now and k in self.active]
                for key in due:
                    self.due[key] = None  # once: that pass sets the next time
                refs = {self.active[k] for k in due}
                if now - last_tick >= self.tick_s:
                    last_tick = now
                    refs |= set(self.active.values())
            for ref in sorted(refs):
                try:
                    if self.trigger is not None:
                        self.trigger(ref)
                except Exception:  # the timer never dies from one ref
                    log.exception("could not queue the rollout pass of %s", ref)
