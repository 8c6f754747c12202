"""Rolling an environment back as a revert commit: the repository holds the state, auto-sync deploys it.

The HTTP route ``POST /environments/{env}/rollback`` (config_sync.app) calls
:meth:`Rollbacks.roll_back` in a worker thread. It fetches, finds the ref the environment
tracks (the default ref's word, as the sync's), and writes ONE new commit on that ref's head
whose ``environments/<env>/`` equals the folder at the target commit. With the local git
host it pushes it fast-forward (a push that lost a race is made again on the new head);
with GitLab it commits to a branch ``rollback/<env>/<sha>`` through the API and opens a
merge request (merged when asked and GitLab allows). It never force-pushes, never writes a
tag and never deploys a state the repository does not hold: the sync of the new head does.
"""

from __future__ import annotations

import base64
import logging
import threading
from collections.abc import Callable, Mapping
from typing import Protocol

from config_sync.deploys.records import DeployRecord
from config_sync.intake.clone import SyncRepo
from config_sync.rollbacks import revert
from config_sync.rollbacks.revert import Rollback, RollbackRefused
from phrame.git import PushRejected, RefMissing
from phrame.gitlab import GitLabError, GitLabProject

log = logging.getLogger(__name__)
PUSH_ATTEMPTS = 3  # a push that lost a race is made again on the new head, this many times in all


class Deployments(Protocol):
    """Each environment's deployments, newest first (:class:`DeployHistory`)."""

    by_env: dict[str, list[DeployRecord]]


class Tracking(Protocol):
    """Which ref publishes each environment (the sync's :class:`Syncer`)."""

    owners: dict[str, str]
    default_ref: str


class Rollbacks:
    def __init__(
        self,
        git: SyncRepo,
        syncer: Tracking,
        history: Deployments,
        *,
        tracks_at: Callable[[str], Mapping[str, str]],
        gitlab: GitLabProject | None = None,
        trigger: Callable[[str], object] | None = None,
    ) -> None:
        """``tracks_at(sha)``: environment -> tracked ref in that commit (before any valid
        default reading); ``trigger(ref)``: sync ``ref`` now (the local host's push)."""
        self.git, self.syncer, self.history = git, syncer, history
        self.tracks_at, self.gitlab, self.trigger = tracks_at, gitlab, trigger
        self._lock = threading.Lock()  # one rollback at a time: each reads the head it writes on

    def roll_back(self, env: str, to: str | None, *, merge: bool = False, who: str | None = None) -> Rollback:
        """Revert ``env`` to ``to`` (default: its previous successful deployment).
        ``RollbackRefused`` says why not; ``GitError``/``GitLabError`` when a host failed."""
        revert.check_name(env)
        to = revert.check_sha(to)
        with self._lock:
            self.git.fetch()
            ref = self._ref_of(env)
            for attempt in range(1, PUSH_ATTEMPTS + 1):
                head = self.git.head(ref)
                target = self._target(env, to)
                changes = self._changes(env, ref, head, target)
                subject = self.git.commit_info(target)[1]
                text = revert.message(env, target, subject, who=who)
                if self.gitlab is not None:
                    return self._merge_request(env, ref, head, target, changes, text, merge=merge)
                sha = self.git.commit_files(head, changes, text)
                try:
                    self.git.push(sha, ref)
                except PushRejected:
                    if attempt == PUSH_ATTEMPTS:
                        raise RollbackRefused(
                            f"{ref} kept moving while rolling {env} back ({attempt} attempts); try again"
                        ) from None
                    log.info("rollback of %s lost a race on %s; again on the new head", env, ref)
                    self.git.fetch()
                    continue
                log.info("rolled %s back to %s: %s on %s", env, target[:12], sha[:12], ref)
                if self.trigger is not None:
                    self.trigger(ref)
                return Rollback(env, ref, target, sha, tuple(changes))
        raise AssertionError("unreachable")

    def _ref_of(self, env: str) -> str:
        owners = dict(self.syncer.owners)
        if not owners:  # no valid reading of the default ref yet: its head's own word
            try:
                owners = dict(self.tracks_at(self.git.head(self.syncer.default_ref)))
            except RefMissing:
                owners = {}
        ref = owners.get(env)
        if ref is None:
            raise RollbackRefused(f"no environment {env!r} in {self.syncer.default_ref}", 404)
        if ref.startswith("refs/tags/") or self.git.is_tag(ref):
            raise RollbackRefused(
                f"{env} tracks the tag {ref.removeprefix('refs/tags/')}: a rollback never moves a tag; "
                "point the tag (or track:) at the release to run"
            )
        return ref

    def _target(self, env: str, to: str | None) -> str:
        if to is None:
            found = revert.previous_success(self.history.by_env.get(env, []))
            if found is None:
                raise RollbackRefused(
                    f"{env} has no earlier successful deployment to roll back to; name a commit with --to"
                )
            return found
        sha = self.git.resolve(to)
        if sha is None:
            raise RollbackRefused(f"commit {to} is not in the repository", 404)
        return sha

    def _changes(self, env: str, ref: str, head: str, target: str) -> dict[str, bytes | None]:
        if not self.git.is_ancestor(target, head):
            raise RollbackRefused(f"{target[:12]} is not an ancestor of {ref} ({head[:12]}): not its history")
        where = revert.folder(env)
        changes = revert.file_changes(self.git.files_under(head, where), self.git.files_under(target, where))
        if not changes:
            raise RollbackRefused(f"{where}/ at {ref} ({head[:12]}) is already as at {target[:12]}")
        return changes

    def _merge_request(
        self,
        env: str,
        ref: str,
        head: str,
        target: str,
        changes: Mapping[str, bytes | None],
        text: str,
        *,
        merge: bool,
    ) -> Rollback:
        assert self.gitlab is not None
        gl = self.gitlab
        branch = revert.branch_name(env, target)
        existing = gl.branch_head(branch)
        if existing is None:
            before = self.git.files_under(head, revert.folder(env))
            commit = gl.create_commit(branch, text, _actions(changes, before), start_sha=head)
        else:  # an earlier request for this very rollback: its merge request, not a second branch
            commit = existing
        title, _, body = text.partition("\n")
        mr = gl.merge_requests.ensure(branch, ref, title, body.strip())
        merged, refused = None, None
        if merge:
            try:
                gl.merge_requests.merge(mr.iid)
                merged = True
            except GitLabError as e:  # reported, not retried: GitLab's rules decide
                merged, refused = False, e.reason
        log.info("rollback of %s to %s: !%d from %s (merged: %s)", env, target[:12], mr.iid, branch, merged)
        return Rollback(env, ref, target, commit, tuple(changes), branch, mr.iid, mr.web_url, merged, refused)


def _actions(changes: Mapping[str, bytes | None], before: Mapping[str, bytes]) -> list[dict[str, str]]:
    """GitLab's commit actions for ``changes`` (``before``: the files at the head)."""
    out = []
    for path, content in changes.items():
        if content is None:
            out.append({"action": "delete", "file_path": path})
            continue
        verb = "update" if path in before else "create"
        encoded = base64.b64encode(content).decode("ascii")
        out.append({"action": verb, "file_path": path, "content": encoded, "encoding": "base64"})
    return out
