"""Which target proposes compose imports, from the settings: GitLab, a local bare
repository, or none (``POST /api/import/compose`` then only returns the files). Called once
by :func:`topic_api.app.create_app`; builds the target without touching the network."""

from __future__ import annotations

from typing import Protocol

from topic_api.import_gitlab import GitLabImports
from topic_api.import_local import LocalImports
from topic_api.import_settings import ImportSettings
from topic_api.imports import Draft, Proposal


class ImportTarget(Protocol):
    def propose(self, draft: Draft, *, dry_run: bool) -> Proposal: ...


def import_target(settings: ImportSettings) -> ImportTarget | None:
    if settings.target == "gitlab":
        return GitLabImports(settings)
    if settings.target == "local":
        return LocalImports(settings)
    return None
