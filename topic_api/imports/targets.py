"""Which target proposes compose imports, from the settings: GitLab, a local bare
repository, or none (``POST /api/import/compose`` then only returns the files). Called once
by :func:`topic_api.app.create_app`; builds the target without touching the network."""

from __future__ import annotations

from typing import Protocol

from topic_api.imports.gitlab_target import GitLabImports
from topic_api.imports.local_target import LocalImports
from topic_api.imports.proposal import Draft, Proposal
from topic_api.imports.settings import ImportSettings


class ImportTarget(Protocol):
    def propose(self, draft: Draft, *, dry_run: bool) -> Proposal: ...


def import_target(settings: ImportSettings) -> ImportTarget | None:
    if settings.target == "gitlab":
        return GitLabImports(settings)
    if settings.target == "local":
        return LocalImports(settings)
    return None
