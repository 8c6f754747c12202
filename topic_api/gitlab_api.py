"""GitLab for compose imports: the tracked branch's head, whether a branch exists, which files
an environment has, one commit that creates the import branch, and its merge request.

Called by :mod:`topic_api.imports.gitlab_target` in a worker thread. The only module of the package
that imports python-gitlab; every SDK or HTTP failure becomes a :class:`GitLabError`
(``status`` 404 when GitLab said "not found", 409/400 as GitLab answered). It never
commits to an existing branch (the commit names ``start_sha``: GitLab creates the branch)
and never touches tags.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

import gitlab
import requests
from gitlab.exceptions import GitlabError

from topic_api.errors import TopicApiError

log = logging.getLogger(__name__)


class GitLabError(TopicApiError):
    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class MergeRequest:
    iid: int
    web_url: str


class GitLabProject:
    def __init__(self, url: str, token: str | None, project: str, *, timeout: float = 10.0) -> None:
        self._gl = gitlab.Gitlab(url, private_token=token, timeout=timeout)
        self._project = self._gl.projects.get(project, lazy=True)
        self._where = f"{url} project {project}"

    def _failed(self, what: str, e: Exception) -> GitLabError:
        status = getattr(e, "response_code", None)
        return GitLabError(
            f"cannot {what} in {self._where}: {e}", status if isinstance(status, int) else None
        )

    def branch_head(self, branch: str) -> str | None:
        """The commit ``branch`` points at, or None when GitLab has no such branch."""
        try:
            found = self._project.branches.get(branch)
        except (GitlabError, requests.RequestException) as e:
            if getattr(e, "response_code", None) == 404:
                return None
            raise self._failed(f"read branch {branch}", e) from e
        commit: Any = getattr(found, "commit", None)
        sha = commit.get("id") if isinstance(commit, dict) else None
        if not isinstance(sha, str):
            raise GitLabError(f"branch {branch} in {self._where} has no commit id")
        return sha

    def files_under(self, folder: str, ref: str) -> set[str]:
        """Paths of the files under ``folder`` at ``ref`` (none when the folder is absent)."""
        try:
            entries = self._project.repository_tree(path=folder, ref=ref, recursive=True, get_all=True)
        except (GitlabError, requests.RequestException) as e:
            if getattr(e, "response_code", None) == 404:
                return set()
            raise self._failed(f"list {folder} at {ref[:12]}", e) from e
        return {str(e["path"]) for e in entries if isinstance(e, dict) and e.get("type") == "blob"}

    def create_branch_commit(
        self, branch: str, start_sha: str, message: str, actions: list[dict[str, Any]]
    ) -> str:
        """One commit on the new ``branch``, which GitLab creates from ``start_sha``."""
        data = {"branch": branch, "start_sha": start_sha, "commit_message": message, "actions": actions}
        try:
            commit = self._project.commits.create(data)
        except (GitlabError, requests.RequestException) as e:
            raise self._failed(f"commit to new branch {branch}", e) from e
        log.info("committed %s to new branch %s", commit.id, branch)
        return str(commit.id)

    def open_merge_request(self, source: str, target: str, title: str, description: str) -> MergeRequest:
        data = {
            "source_branch": source,
            "target_branch": target,
            "title": title,
            "description": description,
            "remove_source_branch": True,
        }
        try:
            mr = self._project.mergerequests.create(data)
        except (GitlabError, requests.RequestException) as e:
            raise self._failed(f"open a merge request from {source}", e) from e
        log.info("opened merge request !%s from %s: %s", mr.iid, source, mr.web_url)
        return MergeRequest(int(mr.iid), str(mr.web_url))
