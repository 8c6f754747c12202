"""Where an update is proposed: a new branch on the local git host (pushed through
``phrame.git``, fast-forward only: a new ref), or a new GitLab branch with one commit
(``start_sha``) and a merge request through ``phrame.gitlab``. Called by
:mod:`image_watch.watcher`. Never writes the tracked branch or a tag, never forces, never
commits to a branch that exists: an existing branch is an update proposed already."""

from __future__ import annotations

import logging
from typing import Protocol

from image_watch.proposal import Update
from phrame.git.writing import GitWriter
from phrame.gitlab import GitLabProject

log = logging.getLogger(__name__)


class Target(Protocol):
    def is_proposed(self, update: Update) -> bool: ...

    def propose(self, update: Update, *, base: str, content: bytes) -> str: ...


class LocalTarget:
    """The local git host: a branch, and a console line (there is no merge request)."""

    def __init__(self, git: GitWriter) -> None:
        self.git = git

    def is_proposed(self, update: Update) -> bool:
        return self.git.has_branch(update.branch)

    def propose(self, update: Update, *, base: str, content: bytes) -> str:
        sha = self.git.commit_files(base, {update.path: content}, update.message())
        self.git.push(sha, update.branch)  # a new ref: the push cannot fast-forward anything else
        older = [b for b in self.git.branches_under(update.folder) if b != update.branch]
        print(
            f"phrame image-watch: {update.env}/{update.service}: {update.old_image} -> {update.image}: "
            f"review and merge branch {update.branch}"
            + (f" (it supersedes {', '.join(older)}: delete those)" if older else ""),
            flush=True,
        )
        return sha


class GitLabTarget:
    """GitLab: the branch and a merge request into the tracked branch; older updates' merge
    requests of the same service are closed."""

    def __init__(self, project: GitLabProject, track: str) -> None:
        self.project, self.track = project, track

    def is_proposed(self, update: Update) -> bool:
        # the branch is written before the merge request: a branch that never had one (a crash
        # between the two) gets it now; one closed by a person stays closed (declined)
        if self.project.branch_head(update.branch) is None:
            return False
        if self.project.merge_requests.find_any(update.branch) is None:
            self.project.merge_requests.ensure(update.branch, self.track, update.title, update.description())
        return True

    def propose(self, update: Update, *, base: str, content: bytes) -> str:
        action = {"action": "update", "file_path": update.path, "content": content.decode()}
        sha = self.project.create_commit(update.branch, update.message(), [action], start_sha=base)
        mr = self.project.merge_requests.ensure(update.branch, self.track, update.title, update.description())
        closed = self.project.merge_requests.close_superseded(update.branch)
        log.info(
            "%s/%s: proposed %s as merge request !%s (%s)%s",
            update.env, update.service, update.image, mr.iid, mr.web_url,
            f"; closed the superseded !{', !'.join(map(str, closed))}" if closed else "",
        )  # fmt: skip
        return sha
