"""One GitLab project over python-gitlab: branches, files, commits, commit statuses, deployments.

config-sync sets statuses, placement and the topic API's imports use merge requests
(:attr:`GitLabProject.merge_requests`), imports read branches and trees and commit. A branch
is created from an explicit sha, a commit names ``start_sha`` or ``last_commit_id``, and any
``refs/tags/*`` target is refused: it never writes to a tag, never force-pushes.
"""

from __future__ import annotations

import logging
import re
from typing import Any

import gitlab

from phrame.gitlab.approvals import MergeApprovals
from phrame.gitlab.deployments import Deployments
from phrame.gitlab.environments import Environments
from phrame.gitlab.errors import GitLabError, converting, refuse_tag
from phrame.gitlab.merge_requests import MergeRequests

log = logging.getLogger(__name__)

STATES = ("pending", "running", "success", "failed", "canceled")
SHA = re.compile(r"^[0-9a-f]{40}$")
_KEEPS_LAST_COMMIT = ("update", "move", "delete")  # the actions GitLab checks last_commit_id on


class GitLabProject:
    """A project (``group/name`` or its id) on ``url``, with a token of scope ``api``."""

    def __init__(self, url: str, token: str | None, project: str | int, *, timeout: float = 10.0) -> None:
        # No retries here: a pass must not stall on a GitLab outage; callers retry on the
        # next pass (or poll), and the transient/permanent kind of the error says whether to.
        self._gl = gitlab.Gitlab(url, private_token=token, timeout=timeout, retry_transient_errors=False)
        self._project = self._gl.projects.get(project, lazy=True)
        self.where = f"{url} project {project}"
        self.merge_requests = MergeRequests(self._project, self.where)
        self.deployments = Deployments(self._project, self.where)
        self.approvals = MergeApprovals(self._project, self.where)
        # a project named by its path has a page to link; one named by its id needs a lookup we skip
        web = f"{url.rstrip('/')}/{project}" if isinstance(project, str) and not project.isdigit() else None
        self.environments = Environments(self._project, self.where, web)

    # -- commit statuses
    def set_status(
        self, sha: str, name: str, state: str, description: str, *, ref: str | None = None
    ) -> None:
        """Set status ``name`` (one stable name per check) of ``sha``. GitLab answers 400 to a
        transition the status already made (running → running): that counts as success."""
        if state not in STATES:
            raise ValueError(f"unknown commit status state {state!r}")
        data = {"state": state, "name": name, "description": description[:255]}
        if ref:  # GitLab names a tag by its short name: refs/tags/v1 -> v1
            data["ref"] = ref.removeprefix("refs/tags/")
        try:
            with converting(f"set status {name}={state} on {sha[:12]}", self.where):
                self._project.commits.get(sha, lazy=True).statuses.create(data)
        except GitLabError as e:
            if not _is_repeated_transition(e):
                raise
            log.debug("status %s=%s on %s was already set", name, state, sha[:12])

    # -- branches and files
    def branch_head(self, branch: str) -> str | None:
        """The commit ``branch`` points at, or None when GitLab has no such branch."""
        try:
            with converting(f"read branch {branch}", self.where):
                found = self._project.branches.get(branch)
        except GitLabError as e:
            if e.status == 404:
                return None
            raise
        commit: Any = getattr(found, "commit", None)
        sha = commit.get("id") if isinstance(commit, dict) else None
        if not isinstance(sha, str):
            raise GitLabError(f"branch {branch} in {self.where} has no commit id")
        return sha

    def create_branch(self, branch: str, sha: str) -> None:
        """Create ``branch`` at the commit ``sha`` (never from a ref that may move meanwhile)."""
        name = refuse_tag(branch, f"create branch {branch}")
        if not SHA.match(sha):
            raise ValueError(f"a branch starts from a full commit sha, not {sha!r}")
        with converting(f"create branch {name} at {sha[:12]}", self.where):
            self._project.branches.create({"branch": name, "ref": sha})
        log.info("created branch %s at %s", name, sha[:12])

    def files_under(self, folder: str, ref: str) -> set[str]:
        """Paths of the files under ``folder`` at ``ref`` (none when the folder is absent)."""
        try:
            with converting(f"list {folder} at {ref[:12]}", self.where):
                entries = self._project.repository_tree(path=folder, ref=ref, recursive=True, get_all=True)
        except GitLabError as e:
            if e.status == 404:
                return set()
            raise
        return {str(e["path"]) for e in entries if isinstance(e, dict) and e.get("type") == "blob"}

    # -- commits
    def create_commit(
        self,
        branch: str,
        message: str,
        actions: list[dict[str, Any]],
        *,
        start_sha: str | None = None,
        last_commit_id: str | None = None,
    ) -> str:
        """One commit of ``actions`` (GitLab's commit actions) on ``branch``; returns its sha.

        ``start_sha``: GitLab creates the new ``branch`` from that commit (it refuses a branch
        that exists). ``last_commit_id``: onto an existing branch, and GitLab refuses the
        update of a file changed since that commit (set on each action that names none).
        One of the two is required: a commit never lands on a head it did not read."""
        name = refuse_tag(branch, f"commit to {branch}")
        if (start_sha is None) == (last_commit_id is None):
            raise ValueError("a commit names exactly one of start_sha (new branch) or last_commit_id")
        data: dict[str, Any] = {"branch": name, "commit_message": message}
        if start_sha is not None:
            data |= {"start_sha": start_sha, "actions": actions}
        else:
            data["actions"] = [
                {"last_commit_id": last_commit_id, **a} if a.get("action") in _KEEPS_LAST_COMMIT else a
                for a in actions
            ]
        what = f"commit to new branch {name}" if start_sha else f"commit to branch {name}"
        with converting(what, self.where):
            commit = self._project.commits.create(data)
        log.info("committed %s to %s branch %s", commit.id, "new" if start_sha else "the", name)
        return str(commit.id)


def _is_repeated_transition(e: GitLabError) -> bool:
    return e.status == 400 and "Cannot transition status" in e.reason
