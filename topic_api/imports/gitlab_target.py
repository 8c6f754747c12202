"""Compose imports with the GitLab host (``PHRAME_GIT_HOST=gitlab``): a new branch
``phrame-import/<env>-<id>`` from the tracked branch's head with one commit of the files,
and a merge request into the tracked branch listing what compose features were not carried.

Called by :mod:`topic_api.compose_routes` in a worker thread, through
:mod:`phrame.gitlab`. No clone is at hand, so the files are validated on their own
(each file's schema and the rules among them, not against the rest of the repository).
Never commits to an existing branch, never writes a tag.
"""

from __future__ import annotations

import threading

from phrame.gitlab import GitLabError, GitLabProject
from topic_api.imports.check import problems_alone
from topic_api.imports.proposal import Draft, ImportRefused, Proposal
from topic_api.imports.settings import ImportSettings

VALIDATED_ALONE = "the files on their own (schemas and the rules among them); config-sync checks the merge"


class GitLabImports:
    def __init__(self, settings: ImportSettings, project: GitLabProject | None = None) -> None:
        assert settings.gitlab_url and settings.gitlab_project
        self.track = settings.track_ref
        self.gitlab = project or GitLabProject(
            settings.gitlab_url,
            settings.gitlab_token,
            settings.gitlab_project,
            timeout=settings.git_timeout_s,
        )
        self._lock = threading.Lock()

    def propose(self, draft: Draft, *, dry_run: bool) -> Proposal:
        with self._lock:
            try:
                return self._propose(draft, dry_run=dry_run)
            except GitLabError as e:
                if e.status in (400, 409) and "already exists" in str(e):
                    raise ImportRefused(409, f"branch {draft.branch} exists: {e}") from e
                raise ImportRefused(503, f"GitLab is unavailable or refused: {e}") from e

    def _propose(self, draft: Draft, *, dry_run: bool) -> Proposal:
        head = self.gitlab.branch_head(self.track)
        if head is None:
            raise ImportRefused(409, f"branch {self.track!r} (PHRAME_TRACK_REF) is not in the GitLab project")
        if not dry_run and self.gitlab.branch_head(draft.branch) is not None:
            raise ImportRefused(
                409,
                f"branch {draft.branch} exists: this import was proposed already (merge or delete it first)",
            )
        existing = self.gitlab.files_under(f"environments/{draft.env}", head)
        kept = [p for p in draft.result.files if p.endswith("/environment.yaml") and p in existing]
        files = {p: t for p, t in draft.result.files.items() if p not in kept}
        problems = problems_alone(draft.result.files)
        if problems:
            raise ImportRefused(422, f"the imported files do not validate: {problems[0].format()}", problems)
        proposal = Proposal(draft, files, kept, scope="files", base=head)
        if dry_run:
            return proposal
        actions = [
            {"action": "update" if p in existing else "create", "file_path": p, "content": t}
            for p, t in sorted(files.items())
        ]
        message = draft.commit_message(list(files))
        proposal.commit = self.gitlab.create_commit(draft.branch, message, actions, start_sha=head)
        proposal.branch = draft.branch
        try:
            mr = self.gitlab.merge_requests.open(
                draft.branch, self.track, draft.title, draft.description(list(files), VALIDATED_ALONE)
            )
        except GitLabError as e:
            raise ImportRefused(
                503,
                f"branch {draft.branch} was written ({proposal.commit[:12]}) but no merge request was "
                f"opened: {e}; open it by hand, or delete the branch and import again",
            ) from e
        proposal.merge_request = {"iid": mr.iid, "web_url": mr.web_url}
        return proposal
