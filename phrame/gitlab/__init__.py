"""The GitLab adapter of every phrame part: one project, its statuses, branches, commits and
merge requests, through python-gitlab (the only package that imports it).

config-sync reports statuses, its plan note and deployments, placement opens review merge requests, the
topic API proposes imports. Every failure is a :class:`GitLabError`, either
:class:`GitLabUnavailable` (transient: call again later) or :class:`GitLabRefused` (permanent).
"""

from __future__ import annotations

from phrame.gitlab.approvals import Approver, MergeApprovals, MergedApprovals
from phrame.gitlab.deployments import Deployment, Deployments
from phrame.gitlab.environments import Environment, Environments
from phrame.gitlab.errors import GitLabError, GitLabRefused, GitLabUnavailable
from phrame.gitlab.merge_requests import MergeRequest, MergeRequests
from phrame.gitlab.project import STATES, GitLabProject

__all__ = [
    "STATES",
    "Approver",
    "Deployment",
    "Deployments",
    "Environment",
    "Environments",
    "GitLabError",
    "GitLabProject",
    "GitLabRefused",
    "GitLabUnavailable",
    "MergeApprovals",
    "MergeRequest",
    "MergeRequests",
    "MergedApprovals",
]
