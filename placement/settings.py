"""Settings of the placement reconciler, read once from ``PHRAME_*`` environment variables.

``phrame placement`` builds one :class:`PlacementSettings` with :meth:`from_env` and hands
it to the loop; nothing else in the package reads the environment. MQTT settings come
from :class:`phrame.mqtt.MqttSettings`. Secrets never appear in ``repr``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from phrame.settings import EnvReader
from phrame.settings.git_host import REPO_URL, git_host_fields, git_host_problem
from phrame.settings.metrics_listen import Listen, read_listen
from placement.errors import SettingsError

DEFAULT_STATE_DIR = "/var/lib/phrame"


@dataclass(frozen=True)
class PlacementSettings:
    repo_url: str = field(repr=False)  # as set: may hold credentials, split off by git_repo
    git_host: str = "local"
    node_timeout_s: float = 20.0  # 3 heartbeats of 5 s + 5 s
    reschedule_after_s: float = 60.0
    node_gc_s: float = 86400.0
    interval_s: float = 10.0
    lock_file: Path | None = None
    state_dir: Path = Path(DEFAULT_STATE_DIR)
    topic_prefix: str = "phrame"
    gitlab_url: str | None = None
    gitlab_token: str | None = field(default=None, repr=False)
    gitlab_project: str | None = None
    git_timeout_s: float = 120.0  # a git fetch or push running longer is killed (transient)
    git_ca_file: Path | None = None  # a private CA for an HTTPS repo_url; None: the system's
    # PHRAME_TRACK_REF, as config-sync: the branch whose environments/ lists the environments,
    # and the ref an environment without ``track:`` follows.
    default_ref: str = "main"
    instance: str = ""  # who we are in commit trailers and logs: host/pid
    metrics_listen: Listen | None = None  # PHRAME_METRICS_LISTEN host:port; None: no listener

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> PlacementSettings:
        r = EnvReader(env, error=SettingsError)
        repo_url = r.required("PHRAME_REPO_URL", REPO_URL)
        settings = cls(
            repo_url=repo_url,
            **git_host_fields(r),
            node_timeout_s=r.number("PHRAME_NODE_TIMEOUT_S", 20.0, minimum=0.1),
            reschedule_after_s=r.number("PHRAME_RESCHEDULE_AFTER_S", 60.0),
            node_gc_s=r.number("PHRAME_NODE_GC_S", 86400.0, minimum=1.0),
            interval_s=r.number("PHRAME_PLACEMENT_INTERVAL_S", 10.0, minimum=0.05),
            lock_file=r.path("PHRAME_LOCK_FILE"),
            state_dir=r.path("PHRAME_STATE_DIR", DEFAULT_STATE_DIR) or Path(DEFAULT_STATE_DIR),
            topic_prefix=r.topic_prefix(),
            git_timeout_s=r.number("PHRAME_GIT_TIMEOUT_S", 120.0, minimum=1.0),
            git_ca_file=r.path("PHRAME_GIT_CA_FILE"),
            # ``refs/heads/main`` is the branch ``main``, as in Environment.track().
            default_ref=(r.text("PHRAME_TRACK_REF", "main") or "main").removeprefix("refs/heads/"),
            instance=f"{os.uname().nodename}/{os.getpid()}",
            metrics_listen=read_listen(r, error=SettingsError),
        )
        problem = git_host_problem(
            settings.git_host,
            {"PHRAME_GITLAB_URL": settings.gitlab_url, "PHRAME_GITLAB_PROJECT": settings.gitlab_project},
        )
        if problem:
            raise SettingsError(problem)
        return settings

    @property
    def clone_cache(self) -> Path:
        return self.state_dir / "placement" / "repo.git"

    @property
    def git_token(self) -> str | None:
        """The token git sends to the remote (through its environment, never in the URL)."""
        return self.gitlab_token if self.git_host == "gitlab" else None
