"""The deployments of one GitLab project, so its Environments page shows what runs where.

config-sync's :mod:`config_sync.deploys.gitlab_environments` records each phrame deployment
(an environment at a commit) as a GitLab deployment: created ``running``, then ``success``,
``failed`` or ``canceled``. GitLab makes the environment on the first deployment named for
it. A deployment only ever moves on from ``running`` (GitLab refuses to change a finished
one); it never touches a branch or a tag.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from phrame.gitlab.errors import converting

STATUSES = ("running", "success", "failed", "canceled")
FINISHED = ("success", "failed", "canceled")


@dataclass(frozen=True)
class Deployment:
    id: int
    status: str


class Deployments:
    """Reached as ``GitLabProject(...).deployments``; ``project`` is python-gitlab's."""

    def __init__(self, project: Any, where: str) -> None:
        self._project = project
        self._where = where

    def find(self, environment: str, sha: str) -> Deployment | None:
        """The newest deployment of ``sha`` to ``environment`` (None: there is none)."""
        with converting(f"list the deployments of {environment}", self._where):
            found = self._project.deployments.list(
                environment=environment, order_by="id", sort="desc", get_all=False, per_page=50
            )
        for d in found:
            if getattr(d, "sha", None) == sha:
                return Deployment(int(d.id), str(d.status))
        return None

    def create(self, environment: str, sha: str, ref: str, status: str) -> Deployment:
        """A deployment of ``sha`` (from branch or tag ``ref``: ``refs/tags/v1`` or ``main``)."""
        if status not in STATUSES:
            raise ValueError(f"unknown deployment status {status!r}")
        tag = ref.startswith("refs/tags/")
        name = ref.removeprefix("refs/tags/").removeprefix("refs/heads/")
        data = {"environment": environment, "sha": sha, "ref": name, "tag": tag, "status": status}
        with converting(f"create a {status} deployment of {sha[:12]} to {environment}", self._where):
            made = self._project.deployments.create(data)
        return Deployment(int(made.id), str(getattr(made, "status", status)))

    def set_status(self, deployment_id: int, status: str) -> None:
        if status not in STATUSES:
            raise ValueError(f"unknown deployment status {status!r}")
        with converting(f"set deployment {deployment_id} to {status}", self._where):
            self._project.deployments.update(deployment_id, {"status": status})
