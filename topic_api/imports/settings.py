"""Where ``POST /api/import/compose`` proposes its files: a local bare repository, GitLab, or
nowhere (the files are only returned). Part of :class:`topic_api.settings.ApiSettings`.

Read with the same variables as config-sync and placement (``PHRAME_GIT_HOST``,
``PHRAME_REPO_URL``, ``PHRAME_GITLAB_*``, ``PHRAME_TRACK_REF``, ``PHRAME_GIT_*``) through
``phrame.settings.EnvReader``; secrets never appear in ``repr``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from phrame.settings import EnvReader
from phrame.settings.git_host import git_host_fields, proposal_branch
from phrame.settings.mirror_dir import DEFAULT_STATE_DIR
from topic_api.errors import SettingsError


@dataclass(frozen=True)
class ImportSettings:
    git_host: str = "local"
    repo_url: str | None = field(default=None, repr=False)  # may hold credentials
    track_ref: str = "main"  # the branch an import's merge request targets
    state_dir: Path = Path(DEFAULT_STATE_DIR)  # <state>/topic-api/repo.git: the clone cache
    gitlab_url: str | None = None
    gitlab_token: str | None = field(default=None, repr=False)
    gitlab_project: str | None = None
    git_timeout_s: float = 120.0
    git_ca_file: Path | None = None

    def __post_init__(self) -> None:
        problem, branch = proposal_branch(self, "imports")
        if problem:
            raise SettingsError(problem)
        object.__setattr__(self, "track_ref", branch)

    @property
    def target(self) -> str | None:
        """``gitlab``, ``local`` (a repository URL is set) or None: imports write nothing."""
        if self.git_host == "gitlab":
            return "gitlab"
        return "local" if self.repo_url else None

    @property
    def clone_cache(self) -> Path:
        return self.state_dir / "topic-api" / "repo.git"

    @classmethod
    def from_env(cls, e: EnvReader) -> ImportSettings:
        return cls(
            repo_url=e.text("PHRAME_REPO_URL"),
            track_ref=e.text("PHRAME_TRACK_REF", "main") or "main",
            state_dir=e.path("PHRAME_STATE_DIR", DEFAULT_STATE_DIR) or Path(DEFAULT_STATE_DIR),
            **git_host_fields(e),
            git_timeout_s=e.number("PHRAME_GIT_TIMEOUT_S", 120.0, minimum=1.0),
            git_ca_file=e.path("PHRAME_GIT_CA_FILE"),
        )
