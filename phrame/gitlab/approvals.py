"""Who approved the merge request that brought a commit to a branch (GitLab's approvals API).

config-sync's protected environments call :meth:`MergeApprovals.of_commit` for a commit
held for approval: the merge requests GitLab associates with the commit (Commits › List
merge requests associated with a commit), the one merged into the tracked branch, and its
approvers (Merge request approvals › Get the approval state: ``approved_by``). Errors are
converted as everywhere in the adapter; an outage is :class:`GitLabUnavailable` (the
caller keeps the commit held and asks again); a 429 is answered at once, not slept out by
python-gitlab (a pass must not wait on GitLab's rate limit). Reads only.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from phrame.gitlab.errors import converting


@dataclass(frozen=True)
class Approver:
    username: str
    name: str = ""


@dataclass(frozen=True)
class MergedApprovals:
    """The merged merge request ``iid`` (its page ``web_url``) and who approved it."""

    iid: int
    web_url: str
    approvers: tuple[Approver, ...] = ()


class MergeApprovals:
    """Reached as ``GitLabProject(...).approvals``; ``project`` is python-gitlab's."""

    def __init__(self, project: Any, where: str) -> None:
        self._project = project
        self._where = where

    def of_commit(self, sha: str, branch: str) -> MergedApprovals | None:
        """The approvals of the merge request merged into ``branch`` that ``sha`` belongs to;
        None when no merged merge request brought it (a direct push)."""
        target = branch.removeprefix("refs/heads/")
        with converting(f"list the merge requests of {sha[:12]}", self._where):
            found = self._project.commits.get(sha, lazy=True).merge_requests(
                get_all=True, obey_rate_limit=False
            )
        merged = [mr for mr in found if mr.get("state") == "merged" and mr.get("target_branch") == target]
        if not merged:
            return None
        mr = max(merged, key=lambda m: int(m.get("iid", 0)))
        iid = int(mr["iid"])
        with converting(f"read the approvals of !{iid}", self._where):
            state = self._project.mergerequests.get(iid, lazy=True).approvals.get(obey_rate_limit=False)
        approvers = []
        for entry in getattr(state, "approved_by", None) or ():
            user = entry.get("user") if isinstance(entry, dict) else None
            if isinstance(user, dict) and user.get("username"):
                approvers.append(Approver(str(user["username"]), str(user.get("name") or "")))
        return MergedApprovals(iid, str(mr.get("web_url", "")), tuple(approvers))
