"""Closing the loop after a publish: commit status ``phrame/deploy`` follows the agents.

The sync pass calls :meth:`DeployWatcher.watch` with the nodes whose manifest changed
(:meth:`DeployWatcher.unchanged` for a new commit that changed none);
the watcher reads each node's retained ``actual/.../status`` (one subscription for all)
and sets ``success`` once every node converged on that manifest generation or a later one,
or ``failed`` with the node and its error after ``PHRAME_DEPLOY_TIMEOUT_S``. A newer deploy
of the same ref cancels the older one. Status callbacks only store; the watcher thread decides.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from config_sync.errors import GitLabError
from config_sync.gitlab_api import Reporter
from phrame_mqtt import Message
from schemas import Topics, load_json

log = logging.getLogger(__name__)
NAME = "phrame/deploy"


def is_converged(
    status: Mapping[str, Any] | None, commit: str, generation: int, ceiling: int | None = None
) -> bool:
    """Converged on the manifest ``generation`` published for ``commit``, or on a later one.

    A later generation of the node's manifest still holds this commit's items unless a
    newer commit of the same ref replaced them, and that deploy cancels this one; so two
    refs changing one node close together both succeed once it converges on the last.
    Config-sync never publishes a node's manifest at a lower generation, nor at or below
    one an agent reported applied (publishing.py), so an old ``applied`` never passes.
    ``ceiling``: the highest generation published for the node since config-sync started;
    a status above it predates a restart that lost the manifests (and the statuses that
    would have raised the floor in time), so it says nothing about this commit.
    """
    if not status or status.get("converged") is not True:
        return False
    applied = status.get("generation")
    if applied is None:  # a status that names no generation: only its commit can tell
        return status.get("commit") == commit
    if not isinstance(applied, int) or isinstance(applied, bool):
        return False
    return applied >= generation and (ceiling is None or applied <= ceiling)


def verdict(
    statuses: Mapping[str, dict[str, Any]],
    commit: str,
    nodes: Mapping[str, int],
    ceilings: Mapping[str, int] | None = None,
) -> tuple[str, str]:
    """``("success", ...)`` when every node converged on its generation (``nodes``: node ->
    the generation published for ``commit``), else ``("running", who)``."""
    top = ceilings or {}
    waiting = [
        n for n, gen in sorted(nodes.items()) if not is_converged(statuses.get(n), commit, gen, top.get(n))
    ]
    if not waiting:
        return "success", f"{len(nodes)} node(s) converged on {commit[:12]}"
    return "running", "waiting for " + ", ".join(waiting)


def failure(
    statuses: Mapping[str, dict[str, Any]],
    commit: str,
    nodes: Mapping[str, int],
    ceilings: Mapping[str, int] | None = None,
) -> str:
    """The first node that did not converge, and why, for the failed status."""
    top = ceilings or {}
    for node, generation in sorted(nodes.items()):
        status = statuses.get(node)
        if is_converged(status, commit, generation, top.get(node)):
            continue
        if not status:
            return f"{node}: no status reported"
        errors = status.get("errors") or []
        if errors:
            first = errors[0]
            text = first.get("message", first) if isinstance(first, dict) else first
            return f"{node}: {text}"
        if status.get("state") == "offline":
            return f"{node}: offline"
        at = f"{str(status.get('commit'))[:12]}, generation {status.get('generation')} of {generation}"
        return f"{node}: not converged (at {at})"
    return "converged"


@dataclass
class Deployment:
    ref: str
    commit: str
    nodes: dict[str, int]  # node -> the manifest generation published for ``commit``
    deadline: float


class DeployWatcher:
    def __init__(
        self,
        reporter: Reporter,
        topics: Topics,
        *,
        timeout_s: float,
        clock: Callable[[], float] = time.monotonic,
        tick_s: float = 0.2,
    ) -> None:
        self.reporter, self.topics, self.timeout_s = reporter, topics, timeout_s
        self.clock, self.tick_s = clock, tick_s
        self.statuses: dict[str, dict[str, Any]] = {}
        # the highest generation each node ever reported applied, kept when its status is
        # cleared: the publisher never numbers a manifest at or below it (after a broker lost
        # the manifests and config-sync its memory, agents still remember)
        self.applied: dict[str, int] = {}
        self.published: dict[str, int] = {}  # node -> highest generation watched since start
        self.active: dict[str, Deployment] = {}  # by ref
        self.finished: list[tuple[str, str, str]] = []  # (commit, state, description)
        self._cond = threading.Condition()
        self._stopping = False
        self._thread: threading.Thread | None = None

    def status_filter(self) -> str:
        return self.topics.node_status_filter()

    def on_status(self, msg: Message) -> None:
        """MQTT callback (network thread): store the node's status; never raise."""
        try:
            node = self.topics.parse(msg.topic).node
            doc = load_json(msg.payload) if msg.payload else None
        except ValueError:
            return
        if node is None or not (doc is None or isinstance(doc, dict)):
            return
        with self._cond:
            if doc is None:
                self.statuses.pop(node, None)
            else:
                self.statuses[node] = doc
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
        self._report(commit, "running", f"waiting for {', '.join(sorted(nodes))}", ref)
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
        with self._cond:
            now = self.clock()
            for ref, dep in list(self.active.items()):
                state, text = verdict(self.statuses, dep.commit, dep.nodes, self.published)
                if state == "success" or now >= dep.deadline:
                    if state != "success":
                        state, text = "failed", failure(self.statuses, dep.commit, dep.nodes, self.published)
                    del self.active[ref]
                    done.append((dep, state, text))
        for dep, state, text in done:
            self.finished.append((dep.commit, state, text))
            self._report(dep.commit, state, text, dep.ref)

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
