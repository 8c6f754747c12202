"""Closing the loop after a publish: commit status ``phrame/deploy`` follows the agents.

The sync pass calls :meth:`DeployWatcher.watch` with the nodes whose manifest changed
(:meth:`DeployWatcher.unchanged` for a new commit that changed none);
the watcher follows each node's ``actual/.../status`` through config-sync's one view of the
actual plane (:class:`phrame.actual.ActualView`, told of each status change)
and sets ``success`` once every node converged on that manifest generation or a later one,
or ``failed`` with the node and its error after ``PHRAME_DEPLOY_TIMEOUT_S``. A newer deploy
of the same ref cancels the older one. Status callbacks only store; the watcher thread decides.
While it runs, the description names the nodes it waits on that the view judges offline
(the shared node-health rule: heartbeats older than ``PHRAME_NODE_TIMEOUT_S`` on this
receiver's clock, or a will), re-reported when that set changes; the timeout stays.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from config_sync.deploys.history import DeployHistory
from config_sync.deploys.verdict import failure, verdict, waiting_for, waiting_text
from config_sync.reporting import CommitReporter
from phrame.actual import ActualView, Change
from phrame.gitlab import GitLabError
from schemas import Topics

log = logging.getLogger(__name__)
NAME = "phrame/deploy"


@dataclass
class Deployment:
    ref: str
    commit: str
    nodes: dict[str, int]  # node -> the manifest generation published for ``commit``
    deadline: float
    offline: frozenset[str] = frozenset()  # the waited-on nodes offline when last reported
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
    ) -> None:
        self.reporter, self.topics, self.timeout_s = reporter, topics, timeout_s
        self.clock, self.tick_s = clock, tick_s
        # the service hands in its one view; alone (tests), the watcher keeps its own
        self.view = view or ActualView(topics, timeout_s=node_timeout_s, clock=clock, wall=wall)
        self.view.listen(self.on_change)
        self.statuses: dict[str, dict[str, Any]] = {}
        # the highest generation each node ever reported applied, kept when its status is
        # cleared: the publisher never numbers a manifest at or below it (after a broker lost
        # the manifests and config-sync its memory, agents still remember)
        self.applied: dict[str, int] = {}
        self.published: dict[str, int] = {}  # node -> highest generation watched since start
        self.active: dict[str, Deployment] = {}  # by ref
        self.finished: list[tuple[str, str, str]] = []  # (commit, state, description)
        self.history: DeployHistory | None = None  # judged on every tick too (``deploys`` topics)
        self._cond = threading.Condition()
        self._stopping = False
        self._thread: threading.Thread | None = None

    def on_change(self, change: Change) -> None:
        """The view's listener (MQTT network thread): store a node's status; never raises."""
        if change.what != "status":
            return
        node, doc = change.node, change.status
        with self._cond:
            if doc is None:
                self.statuses.pop(node, None)
            else:
                self.statuses[node] = dict(doc)
                generation = doc.get("generation")
                if isinstance(generation, int) and not isinstance(generation, bool):
                    self.applied[node] = max(self.applied.get(node, 0), generation)
            self._cond.notify_all()

    def applied_generations(self) -> dict[str, int]:
        """Node -> the highest manifest generation it reported applied (a copy)."""
        with self._cond:
            return dict(self.applied)

    def watch(self, ref: str, commit: str, nodes: Mapping[str, int]) -> None:
        """Follow ``commit`` of ``ref`` on ``nodes`` (node -> its published manifest generation)."""
        if not nodes:
            return
        with self._cond:
            for node, generation in nodes.items():
                self.published[node] = max(self.published.get(node, 0), generation)
            older = self.active.pop(ref, None)
            self.active[ref] = Deployment(
                ref, commit, dict(sorted(nodes.items())), self.clock() + self.timeout_s
            )
            self._cond.notify_all()
        if older is not None and older.commit != commit:
            self._report(older.commit, "canceled", f"superseded by {commit[:12]}", ref)
        offline = self.view.offline(nodes)
        with self._cond:
            if (dep := self.active.get(ref)) is not None and dep.commit == commit:
                dep.offline = frozenset(offline)
        self._report(commit, "running", waiting_text(sorted(nodes), offline), ref)
        with self._cond:
            if (dep := self.active.get(ref)) is not None and dep.commit == commit:
                dep.announced = True
        self.check()

    def unchanged(self, ref: str, commit: str) -> None:
        """``commit`` of ``ref`` changed no node's desired state (no manifest published): it
        is deployed as soon as what it builds on is, so at once, unless the ref's previous
        deployment is still converging; then it takes that one over (same nodes)."""
        with self._cond:
            older = self.active.get(ref)
        if older is not None and older.commit != commit:
            self.watch(ref, commit, older.nodes)
            return
        text = "nothing to change: no node's desired state changed"
        self.finished.append((commit, "success", text))
        self._report(commit, "success", text, ref)

    def check(self) -> None:
        """Finish every deployment that converged or timed out (the thread calls this)."""
        done: list[tuple[Deployment, str, str]] = []
        running: list[tuple[Deployment, str]] = []  # whose offline nodes changed
        with self._cond:
            now = self.clock()
            for ref, dep in list(self.active.items()):
                if not dep.announced:  # watch() is still reporting it running
                    continue
                offline = self.view.offline(dep.nodes)
                state, text = verdict(self.statuses, dep.commit, dep.nodes, self.published, offline)
                if state == "success" or now >= dep.deadline:
                    if state != "success":
                        text = failure(self.statuses, dep.commit, dep.nodes, self.published, offline)
                        state = "failed"
                    del self.active[ref]
                    done.append((dep, state, text))
                    continue
                waiting = waiting_for(self.statuses, dep.commit, dep.nodes, self.published)
                waited_offline = frozenset(n for n in waiting if n in offline)
                if waited_offline != dep.offline:
                    dep.offline = waited_offline
                    running.append((dep, text))
        for dep, text in running:
            self._report(dep.commit, "running", text, dep.ref)
        for dep, state, text in done:
            self.finished.append((dep.commit, state, text))
            self._report(dep.commit, state, text, dep.ref)
        if self.history is not None:
            with self._cond:
                statuses, ceilings = dict(self.statuses), dict(self.published)
            self.history.check(statuses, ceilings, self.view.offline)

    def _report(self, commit: str, state: str, text: str, ref: str) -> None:
        log.info("deploy of %s on %s: %s (%s)", commit[:12], ref, state, text)
        # never raises: check() reports each finished deployment on its own, so one failed
        # report cannot leave the others (already out of ``active``) "running" forever
        try:
            self.reporter.set_status(commit, NAME, state, text, ref=ref)
        except GitLabError as e:  # the adapter's own error; anything else is a bug and is raised
            log.warning("could not report deploy %s of %s: %s", state, commit[:12], e)

    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, name="config-sync-deploy", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
        if self._thread is not None:
            self._thread.join(5)

    def _loop(self) -> None:
        while True:
            with self._cond:
                if self._stopping:
                    return
                self._cond.wait(self.tick_s)
            try:
                self.check()
            except Exception:
                log.exception("deploy watch failed; continuing")
