"""A preview as a GitLab review environment: ``review/<env>-mr-<iid>`` with a deployment per
head it runs, stopped with the preview; and the approvals a fork's preview waits for.

The preview manager calls it on the ``reviews`` worker. GitLab being away or refusing never
holds a preview back: the error is logged and the next review tries again (a stop that
failed leaves the GitLab environment to GitLab's own clean-up of stale environments).
"""

from __future__ import annotations

import logging

from config_sync.previews.manager import gitlab_name
from phrame.gitlab import GitLabError, GitLabProject

log = logging.getLogger(__name__)


class GitLabReviewApps:
    def __init__(self, project: GitLabProject) -> None:
        self.project = project

    def started(self, preview: str, sha: str, ref: str) -> str | None:
        """Ensure the environment and a ``success`` deployment of ``sha`` to it; its page."""
        name = gitlab_name(preview)
        try:
            env = self.project.environments.ensure(name)
            if self.project.deployments.find(name, sha) is None:
                self.project.deployments.create(name, sha, ref, "success")
        except GitLabError as e:
            log.warning("could not record preview %s as GitLab environment %s: %s", preview, name, e)
            return None
        return env.web_url

    def stopped(self, preview: str) -> None:
        name = gitlab_name(preview)
        try:
            self.project.environments.stop(name)
        except GitLabError as e:
            log.warning("could not stop GitLab environment %s: %s", name, e)

    def approvals(self, iid: int) -> int:
        try:
            return self.project.merge_requests.approvals(iid)
        except GitLabError as e:  # unknown: the fork's preview keeps waiting, the next review asks again
            log.warning("could not read the approvals of !%d: %s", iid, e)
            return 0
