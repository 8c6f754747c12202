"""GitLab merge requests for ``placement: review``: one open merge request per placement branch.

Called by the reconciler after it pushed ``placement/<env>/<short-sha>``. It looks for an
open merge request from that branch first and creates one only when there is none, so a
rerun never opens a second; once it opened one, the environment's older placement merge
requests are closed (superseded). The only module of the package that imports python-gitlab.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import gitlab
import requests
from gitlab.exceptions import GitlabCreateError, GitlabError

from placement.errors import GitLabError

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class MergeRequest:
    iid: int
    web_url: str
    is_new: bool


class MergeRequests:
    """Finds or opens the merge request of a placement branch in one GitLab project."""

    def __init__(self, url: str, token: str | None, project: str, *, timeout: float = 10.0) -> None:
        self._gl = gitlab.Gitlab(url, private_token=token, timeout=timeout)
        self._project = self._gl.projects.get(project, lazy=True)
        self._where = f"{url} project {project}"

    def find_open(self, source_branch: str) -> MergeRequest | None:
        try:
            found = self._project.mergerequests.list(
                state="opened", source_branch=source_branch, get_all=False, per_page=20
            )
        except (GitlabError, requests.RequestException) as e:  # python-gitlab passes the latter through
            raise GitLabError(f"cannot list merge requests of {self._where}: {e}") from e
        for mr in found:
            if mr.source_branch == source_branch:
                return MergeRequest(int(mr.iid), str(mr.web_url), is_new=False)
        return None

    def ensure(self, source_branch: str, target_branch: str, title: str, description: str) -> MergeRequest:
        """The open merge request from ``source_branch``: the existing one, or a new one."""
        existing = self.find_open(source_branch)
        if existing is not None:
            return existing
        try:
            mr = self._project.mergerequests.create(
                {
                    "source_branch": source_branch,
                    "target_branch": target_branch,
                    "title": title,
                    "description": description,
                    "remove_source_branch": True,
                }
            )
        except GitlabCreateError as e:
            # 409: another instance opened it between our lookup and our create.
            if e.response_code == 409:
                again = self.find_open(source_branch)
                if again is not None:
                    return again
            raise GitLabError(
                f"cannot open a merge request from {source_branch} in {self._where}: {e}"
            ) from e
        except (GitlabError, requests.RequestException) as e:
            raise GitLabError(
                f"cannot open a merge request from {source_branch} in {self._where}: {e}"
            ) from e
        log.info("opened merge request !%s from %s: %s", mr.iid, source_branch, mr.web_url)
        return MergeRequest(int(mr.iid), str(mr.web_url), is_new=True)

    def close_superseded(self, source_branch: str) -> list[int]:
        """Close every open merge request from another ``placement/<env>/*`` branch of the
        same environment as ``source_branch``: only the newest proposal stays open."""
        prefix = source_branch.rsplit("/", 1)[0] + "/"
        closed: list[int] = []
        try:
            for mr in self._project.mergerequests.list(state="opened", iterator=True, per_page=100):
                branch = str(mr.source_branch)
                if branch.startswith(prefix) and branch != source_branch:
                    mr.state_event = "close"
                    mr.save()
                    closed.append(int(mr.iid))
                    log.info(
                        "closed merge request !%s from %s: superseded by %s", mr.iid, branch, source_branch
                    )
        except (GitlabError, requests.RequestException) as e:
            raise GitLabError(
                f"cannot close the merge requests {source_branch} supersedes in {self._where}: {e}"
            ) from e
        return closed
