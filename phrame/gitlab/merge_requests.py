"""The merge requests of one GitLab project: find, open (once), close, and the one plan note.

Placement calls :meth:`MergeRequests.ensure` for a placement branch and then
:meth:`MergeRequests.close_superseded`; the topic API's imports call :meth:`MergeRequests.open`;
config-sync edits its plan note with :meth:`MergeRequests.upsert_note` and opens (and, when
asked, merges with :meth:`MergeRequests.merge`) a rollback's merge request. It never opens a
second merge request for a branch, never targets a tag and never writes two plan notes.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from phrame.gitlab.errors import GitLabError, converting, refuse_tag

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class MergeRequest:
    iid: int
    web_url: str
    is_new: bool = False  # opened by this call (not found open)


class MergeRequests:
    """Reached as ``GitLabProject(...).merge_requests``; ``project`` is python-gitlab's."""

    def __init__(self, project: Any, where: str) -> None:
        self._project = project
        self._where = where

    def approvals(self, iid: int) -> int:
        """How many people approved merge request ``iid`` (a fork's preview waits for one)."""
        return approvals_given(self._project, self._where, iid)

    def find_open(self, source_branch: str) -> MergeRequest | None:
        """The open merge request from ``source_branch``, or None."""
        with converting(f"list merge requests from {source_branch}", self._where):
            found = self._project.mergerequests.list(
                state="opened", source_branch=source_branch, get_all=False, per_page=20
            )
        for mr in found:
            if mr.source_branch == source_branch:
                return MergeRequest(int(mr.iid), str(mr.web_url))
        return None

    def find_any(self, source_branch: str) -> MergeRequest | None:
        """A merge request from ``source_branch`` in any state (open, closed, merged), or None:
        whether one was ever opened (the image watcher's record of a proposal)."""
        with converting(f"list merge requests from {source_branch}", self._where):
            found = self._project.mergerequests.list(source_branch=source_branch, get_all=False, per_page=20)
        for mr in found:
            if mr.source_branch == source_branch:
                return MergeRequest(int(mr.iid), str(mr.web_url))
        return None

    def open(self, source_branch: str, target_branch: str, title: str, description: str) -> MergeRequest:
        """Open a merge request (the source branch is removed when it merges)."""
        target = refuse_tag(target_branch, f"open a merge request into {target_branch}")
        data = {
            "source_branch": source_branch,
            "target_branch": target,
            "title": title,
            "description": description,
            "remove_source_branch": True,
        }
        with converting(f"open a merge request from {source_branch}", self._where):
            mr = self._project.mergerequests.create(data)
        log.info("opened merge request !%s from %s: %s", mr.iid, source_branch, mr.web_url)
        return MergeRequest(int(mr.iid), str(mr.web_url), is_new=True)

    def ensure(self, source_branch: str, target_branch: str, title: str, description: str) -> MergeRequest:
        """The open merge request from ``source_branch``: the existing one, or a new one."""
        existing = self.find_open(source_branch)
        if existing is not None:
            return existing
        try:
            return self.open(source_branch, target_branch, title, description)
        except GitLabError as e:
            # 409: another instance opened it between our lookup and our create.
            again = self.find_open(source_branch) if e.status == 409 else None
            if again is None:
                raise
            return again

    def merge(self, iid: int) -> None:
        """Accept merge request ``iid`` now (GitLab's "Merge a merge request"); GitLab's refusal
        (not mergeable, approvals missing, a pipeline required) is a ``GitLabRefused``, once:
        never retried here."""
        with converting(f"merge !{iid}", self._where):
            self._project.mergerequests.get(iid, lazy=True).merge()
        log.info("merged merge request !%s", iid)

    def close_superseded(self, source_branch: str) -> list[int]:
        """Close every open merge request from another branch in the folder of
        ``source_branch`` (``placement/<env>/*``): only the newest proposal stays open."""
        prefix = source_branch.rsplit("/", 1)[0] + "/"
        closed: list[int] = []
        with converting(f"close the merge requests {source_branch} supersedes", self._where):
            for mr in self._project.mergerequests.list(state="opened", iterator=True, per_page=100):
                branch = str(mr.source_branch)
                if branch.startswith(prefix) and branch != source_branch:
                    mr.state_event = "close"
                    mr.save()
                    closed.append(int(mr.iid))
                    log.info(
                        "closed merge request !%s from %s: superseded by %s", mr.iid, branch, source_branch
                    )
        return closed

    def upsert_note(self, iid: int, body: str, marker: str) -> str:
        """Edit the note of merge request ``iid`` that carries the hidden ``marker``, or create
        it: never two such notes. Returns the body as posted (the marker first if absent)."""
        if marker not in body:
            body = f"{marker}\n{body}"
        with converting(f"write the plan note on !{iid}", self._where):
            mr = self._project.mergerequests.get(iid, lazy=True)
            existing = next(
                (n for n in mr.notes.list(iterator=True, sort="asc") if marker in (n.body or "")), None
            )
            if existing is None:
                mr.notes.create({"body": body})
            elif existing.body != body:
                existing.body = body
                existing.save()
        return body


def approvals_given(project: Any, where: str, iid: int) -> int:
    """How many people approved merge request ``iid`` (GitLab's ``GET
    /projects/:id/merge_requests/:iid/approvals``: the length of ``approved_by``)."""
    with converting(f"read the approvals of !{iid}", where):
        state = project.mergerequests.get(iid, lazy=True).approvals.get()
    approved_by = getattr(state, "approved_by", None) or []
    return len(approved_by)
