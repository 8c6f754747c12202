"""Protected environments and freezes in config-sync: the hold gate, approving, waking up.

The :class:`~config_sync.intake.syncing.Syncer` asks :meth:`Approvals.gate` for the gate of
each publication (wrapped around the staged rollouts' gate) and :meth:`Approvals.report_hold`
after it; the approve route calls :meth:`Approvals.approve`. Which protection judges a commit
is the environment's ``environment.yaml`` at the commit its ``sync`` topic last applied
(read through ``read``, the Syncer's cached readings), else the commit's own. With GitLab, the
approvals of the merged merge request are read before the publication (never under the
publisher's lock) and kept in the store; an outage leaves the commit held and asks again.
A freeze's end queues a pass of the ref (``trigger``) on this object's
:class:`phrame.runtime.Runner`: no thread sleeps. Never publishes desired state itself.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, replace
from typing import Any, Protocol

from config_sync.approvals.hold import changes, hold_back
from config_sync.approvals.protection import (
    Approval,
    Hold,
    Protection,
    approvers,
    decide,
    describe,
    judging,
    protection_of,
)
from config_sync.approvals.store import ApprovalStore
from config_sync.models import Reading
from config_sync.publication.order import json_object
from config_sync.publication.sender import Gate, SyncOutcome
from config_sync.reporting import CommitReporter
from config_sync.rollouts.gate import Gated
from phrame.gitlab import GitLabError, GitLabUnavailable, MergedApprovals
from phrame.runtime import Runner
from schemas import Topics

log = logging.getLogger(__name__)
DEPLOY = "phrame/deploy"
COMMIT = re.compile(r"^[0-9a-f]{7,64}$")
GITLAB_RETRY_S = 10.0  # a GitLab outage: ask again after this long (the commit stays held)
WAKE_MARGIN_S = 0.05  # a freeze's end is past by this much when its pass runs


class MergeApprovalReader(Protocol):
    """``phrame.gitlab.MergeApprovals``: who approved the merge request that merged a commit."""

    def of_commit(self, sha: str, branch: str) -> MergedApprovals | None: ...


@dataclass(frozen=True)
class Answer:
    status: int  # 202 recorded, 400 bad request, 404 no such environment, 409 nothing held at that commit
    message: str
    commit: str | None = None
    approvers: tuple[str, ...] = ()
    needed: int = 0

    @property
    def is_taken(self) -> bool:
        return self.status == 202


class Approvals:
    def __init__(
        self,
        topics: Topics,
        store: ApprovalStore,
        reporter: CommitReporter,
        *,
        read: Callable[[str], Reading],
        sync_state: Callable[[str], Mapping[str, Any] | None],
        clock: Callable[[], float] = time.time,
        gitlab: MergeApprovalReader | None = None,
    ) -> None:
        self.topics, self.store, self.reporter = topics, store, reporter
        self.read, self.sync_state, self.clock, self.gitlab = read, sync_state, clock, gitlab
        self.trigger: Callable[[str], None] | None = None  # queue a pass of a ref (no fetch)
        self.known: Callable[[], Collection[str]] = lambda: ()  # the environments config-sync publishes
        self.held: dict[str, dict[str, Any]] = {}  # env -> the commit held, its ref and the hold
        self.gitlab_retry_s = GITLAB_RETRY_S
        # holds to announce (env, commit, ref, hold doc), once per environment, commit and reason
        self._announce: list[tuple[str, str, str, dict[str, Any]]] = []
        self._announced: dict[str, tuple[str, str]] = {}
        self._lock = threading.Lock()
        self.runner: Runner[str] = Runner("config-sync-approvals", self._wake)

    # -- the gate of a publication (a ref's worker thread)
    def protection(self, env: str, reading: Reading) -> Protection:
        """The protection that judges ``reading`` for ``env`` (see the module docstring)."""
        own = protection_of(reading.protections.get(env))
        applied = (self.sync_state(env) or {}).get("last_applied") or {}
        last = applied.get("commit") if isinstance(applied, Mapping) else None
        if not isinstance(last, str) or not last:
            return judging(None, own)  # never deployed: its own file
        if last == reading.sha:
            return own
        try:
            before = self.read(last)
        except Exception as e:
            log.warning(
                "cannot read %s, last deployed to %s (%s); judging by the commit's own file",
                last[:12],
                env,
                e,
            )
            return own
        if before.rendered is None:
            return own
        return judging(protection_of(before.protections.get(env)), own)

    def gate(
        self,
        ref: str,
        reading: Reading,
        environments: Collection[str],
        inner: Callable[[Collection[str]], Gate | None],
    ) -> Gate | None:
        """The gate of publishing ``reading`` to ``environments``: the held ones keep what is
        published; ``inner(environments not held)`` (the rollouts' gate) runs on the rest."""
        if reading.rendered is None:
            return inner(environments)
        judged = {env: self.protection(env, reading) for env in sorted(environments)}
        judged = {env: p for env, p in judged.items() if not p.is_empty}
        now = self.clock()
        decided = {env: decide(p, self.store.of(env), reading.sha, now) for env, p in judged.items()}
        holds = {env: h for env, h in decided.items() if h is not None}
        if not holds:
            self._note(ref, reading.sha, environments, {})
            return inner(environments)

        def gate(
            rendered: Mapping[str, dict[str, Any]], published: Mapping[str, bytes], previous: Any
        ) -> Gated:
            held = {env: h for env, h in holds.items() if changes(env, rendered, previous, self.topics)}
            out = hold_back(rendered, previous, held, self.topics)
            then = inner([e for e in environments if e not in held])
            gated = then(out, published, previous) if then is not None else Gated(out)
            # a hold the sync topic already says (the run before a restart announced it)
            said = {
                env
                for env, h in held.items()
                if _said(published.get(self.topics.env_sync(env)), reading.sha, h)
            }
            self._note(ref, reading.sha, environments, held, said)
            return replace(gated, holds={env: h.to_doc() for env, h in held.items()})

        return gate

    def prepare(self, ref: str, reading: Reading) -> None:
        """Before a publication (no lock held): with GitLab, the approvers of the merge request
        that merged ``reading`` into ``ref``, for each environment of ``ref`` it would hold."""
        if self.gitlab is None or reading.rendered is None:
            return
        for env in sorted(reading.tracking(ref)):
            needed = self.protection(env, reading).approvals
            if needed > len(approvers(self.store.of(env), reading.sha)):
                self._ask_gitlab(env, ref, reading.sha)

    def _ask_gitlab(self, env: str, ref: str, sha: str) -> None:
        """The merged merge request's approvers, into the store (an outage: ask again later)."""
        assert self.gitlab is not None
        try:
            merged = self.gitlab.of_commit(sha, ref)
        except GitLabUnavailable as e:
            log.warning(
                "approvals of %s for %s not known yet (%s); asking again in %.0f s",
                sha[:12],
                env,
                e,
                self.gitlab_retry_s,
            )
            self.runner.queue.add(ref, self.gitlab_retry_s)
            return
        except GitLabError as e:
            log.warning("GitLab refused the approvals of %s for %s: %s", sha[:12], env, e)
            return
        if merged is None:
            return
        at = self.clock()
        for who in merged.approvers:
            if self.store.add(env, Approval(sha, who.username, at, via="gitlab")):
                log.info(
                    "%s approved !%d, which merged %s into %s: counts for %s",
                    who.username,
                    merged.iid,
                    sha[:12],
                    ref,
                    env,
                )

    def _note(
        self,
        ref: str,
        sha: str,
        environments: Collection[str],
        held: Mapping[str, Hold],
        said: Collection[str] = (),
    ) -> None:
        """Remember what is held (the route, ``/status``) and wake up when a freeze ends."""
        with self._lock:
            for env in environments:
                if env in held:
                    doc = held[env].to_doc()
                    self.held[env] = {"commit": sha, "ref": ref, **doc}
                    if self._announced.get(env) != (sha, held[env].reason):
                        self._announced[env] = (sha, held[env].reason)
                        if env not in said:
                            self._announce.append((env, sha, ref, doc))
                else:
                    self.held.pop(env, None)
                    self._announced.pop(env, None)
        for hold in held.values():
            if hold.until is not None:
                self.runner.queue.add(ref, max(0.0, hold.until - self.clock()) + WAKE_MARGIN_S)

    def take_announcements(self) -> list[tuple[str, str, str, dict[str, Any]]]:
        """The holds begun since the last call (env, commit, ref, hold doc), each once per
        environment, commit and reason: config-sync notifies them as ``suspended``."""
        with self._lock:
            out, self._announce = self._announce, []
        return out

    def report_hold(self, ref: str, outcome: SyncOutcome) -> bool:
        """After a publication that changed no node: ``phrame/deploy`` says why the commit
        waits (True), instead of "nothing to change" (False: nothing held)."""
        holds = outcome.rollouts.holds if outcome.rollouts is not None else {}
        if not holds:
            return False
        text = "; ".join(f"{env}: {describe(doc)}" for env, doc in sorted(holds.items()))
        try:
            self.reporter.set_status(outcome.commit, DEPLOY, "running", text, ref=ref)
        except GitLabError as e:
            log.warning("could not report %s running on %s: %s", DEPLOY, outcome.commit[:12], e)
        return True

    # -- approving (HTTP)
    def approve(self, env: str, commit: object, who: str, *, override_freeze: bool = False) -> Answer:
        """Record ``who``'s approval of the commit held for ``env`` (named in full or by a
        prefix of 7+ hex digits); the ref's pass then decides again."""
        if not isinstance(commit, str) or not COMMIT.match(commit.strip().lower()):
            return Answer(400, 'name the commit to approve: {"commit": "<sha>"} (7 to 64 hex digits)')
        commit = commit.strip().lower()
        with self._lock:
            held = dict(self.held.get(env) or {})
        if not held:
            if env not in self.known():
                return Answer(404, f"no environment {env!r} is published by this config-sync")
            return Answer(409, f"{env}: nothing waits for an approval (no commit is held)")
        full = str(held["commit"])
        if not full.startswith(commit):
            return Answer(
                409, f"{env}: commit {commit[:12]} is not the one held: {full[:12]} waits ({held['reason']})"
            )
        self.store.add(env, Approval(full, who, self.clock(), override_freeze, "phrame"))
        who_all = approvers(self.store.of(env), full)
        needed = int(held.get("approvals", {}).get("needed", 0))
        self.runner.queue.add(str(held["ref"]))
        what = "approval and freeze override" if override_freeze else "approval"
        message = f"{env}: {what} of {full[:12]} by {who} recorded ({len(who_all)}/{needed} approvals)"
        log.info("%s", message)
        return Answer(202, message, full, who_all, needed)

    def approvals_for(self, env: str, commit: str) -> tuple[dict[str, Any], ...]:
        """Who approved ``commit`` for ``env`` (one entry per holder), for its deploy record."""
        out: dict[str, dict[str, Any]] = {}
        for a in self.store.of(env):
            if a.commit != commit:
                continue
            entry = out.setdefault(a.by, {"by": a.by, "at": a.at, "via": a.via, "override_freeze": False})
            entry["override_freeze"] = entry["override_freeze"] or a.override_freeze
        return tuple(out.values())

    def snapshot(self) -> dict[str, Any]:
        with self._lock:
            return {env: dict(doc) for env, doc in sorted(self.held.items())}

    # -- waking up (the runner's thread)
    def _wake(self, ref: str) -> None:
        if self.trigger is not None:
            self.trigger(ref)

    def start(self) -> None:
        self.runner.start()

    def stop(self) -> None:
        self.runner.stop(5)


def _said(raw: bytes | None, commit: str, hold: Hold) -> bool:
    """Whether a published ``sync`` payload already holds ``commit`` for the same reason."""
    doc = json_object(raw)
    said = (doc or {}).get("hold")
    return (
        doc is not None
        and doc.get("commit") == commit
        and isinstance(said, dict)
        and said.get("reason") == hold.reason
    )
