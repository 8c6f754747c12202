"""``WatchSettings`` from ``PHRAME_*``: where the config repo is (the same variables as
config-sync: ``PHRAME_GIT_HOST``, ``PHRAME_REPO_URL``, ``PHRAME_GITLAB_*``,
``PHRAME_TRACK_REF``), how often to look (``PHRAME_IMAGE_WATCH_INTERVAL_S``), registry
credentials (``PHRAME_REGISTRY_AUTH_FILE``: a Docker ``config.json``) and the registries
spoken to over plain HTTP (``PHRAME_REGISTRY_PLAIN_HTTP``). Secrets never in ``repr``."""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass, field
from pathlib import Path

from image_watch.registry import Credentials
from phrame.settings import EnvReader, SettingsError
from phrame.settings.git_host import git_host_fields, git_host_problem
from phrame.settings.mirror_dir import DEFAULT_STATE_DIR


class WatchSettingsError(SettingsError):
    """A ``PHRAME_*`` setting of the image watcher is wrong; the message names it."""


@dataclass(frozen=True)
class WatchSettings:
    repo_url: str = field(repr=False)  # may hold credentials
    git_host: str = "local"
    track_ref: str = "main"
    state_dir: Path = Path(DEFAULT_STATE_DIR)
    gitlab_url: str | None = None
    gitlab_token: str | None = field(default=None, repr=False)
    gitlab_project: str | None = None
    interval_s: float = 300.0
    auth_file: Path | None = None
    plain_http: frozenset[str] = frozenset()
    platform: tuple[str, str] = ("linux", "amd64")
    git_timeout_s: float = 120.0
    git_ca_file: Path | None = None

    def __post_init__(self) -> None:
        problem = git_host_problem(
            self.git_host,
            {
                "PHRAME_GITLAB_URL": self.gitlab_url,
                "PHRAME_GITLAB_TOKEN": self.gitlab_token,
                "PHRAME_GITLAB_PROJECT": self.gitlab_project,
            },
        )
        if problem:
            raise WatchSettingsError(problem)
        object.__setattr__(self, "track_ref", self.track_ref.removeprefix("refs/heads/") or "main")
        if self.track_ref.startswith("refs/"):
            raise WatchSettingsError(
                f"PHRAME_TRACK_REF={self.track_ref!r}: image updates need a branch to propose to"
            )

    @property
    def clone_cache(self) -> Path:
        return self.state_dir / "image-watch" / "repo.git"

    def credentials(self) -> dict[str, Credentials]:
        """Registry host -> credentials, from the ``auths`` of the Docker ``config.json``
        (``auth`` as base64 ``user:password``, or ``username`` and ``password``)."""
        if self.auth_file is None:
            return {}
        try:
            doc = json.loads(self.auth_file.read_text())
            out = {}
            for host, entry in (doc.get("auths") or {}).items():
                if entry.get("auth"):
                    user, _, password = base64.b64decode(entry["auth"]).decode().partition(":")
                else:
                    user, password = entry["username"], entry["password"]
                key = host.removeprefix("https://").removeprefix("http://").split("/")[0]
                key = "docker.io" if key == "index.docker.io" else key  # docker login's Hub key
                out[key] = Credentials(user, password)
            return out
        except (OSError, ValueError, KeyError, AttributeError, TypeError) as e:
            raise WatchSettingsError(
                f"PHRAME_REGISTRY_AUTH_FILE {self.auth_file}: not a Docker config.json with auths: {e}"
            ) from e

    @classmethod
    def from_env(cls, e: EnvReader) -> WatchSettings:
        url = e.text("PHRAME_REPO_URL")
        if not url:
            raise WatchSettingsError("PHRAME_REPO_URL is required: the config repository the watcher reads")
        plain = e.text("PHRAME_REGISTRY_PLAIN_HTTP", "") or ""
        platform = (e.text("PHRAME_IMAGE_PLATFORM", "linux/amd64") or "linux/amd64").split("/")
        if len(platform) != 2 or not all(platform):
            raise WatchSettingsError("PHRAME_IMAGE_PLATFORM must be OS/ARCH, such as linux/arm64")
        settings = cls(
            repo_url=url,
            track_ref=e.text("PHRAME_TRACK_REF", "main") or "main",
            state_dir=e.path("PHRAME_STATE_DIR", DEFAULT_STATE_DIR) or Path(DEFAULT_STATE_DIR),
            **git_host_fields(e),
            interval_s=e.number("PHRAME_IMAGE_WATCH_INTERVAL_S", 300.0, minimum=10.0),
            auth_file=e.path("PHRAME_REGISTRY_AUTH_FILE"),
            plain_http=frozenset(h.strip() for h in plain.split(",") if h.strip()),
            platform=(platform[0], platform[1]),
            git_timeout_s=e.number("PHRAME_GIT_TIMEOUT_S", 120.0, minimum=1.0),
            git_ca_file=e.path("PHRAME_GIT_CA_FILE"),
        )
        settings.credentials()  # a bad file is a settings error at start, not at the first tick
        return settings
