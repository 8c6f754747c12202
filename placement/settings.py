"""Settings of the placement reconciler, read once from ``PHRAME_*`` environment variables.

``phrame placement`` builds one :class:`PlacementSettings` with :meth:`from_env` and hands
it to the loop; nothing else in the package reads the environment. MQTT settings come
from :class:`phrame_mqtt.MqttSettings`. Secrets never appear in ``repr``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import quote, urlsplit, urlunsplit

from placement.errors import SettingsError

DEFAULT_STATE_DIR = "/var/lib/phrame"


def _number(env: Mapping[str, str], name: str, default: float, *, minimum: float) -> float:
    raw = env.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = float(raw)
    except ValueError:
        raise SettingsError(f"{name}={raw!r} is not a number") from None
    if value < minimum:
        raise SettingsError(f"{name}={raw!r} must be at least {minimum}")
    return value


def _secret(env: Mapping[str, str], name: str) -> str | None:
    path = env.get(name + "_FILE")
    if path:
        try:
            return Path(path).read_text("utf-8").rstrip("\n")
        except OSError as e:
            raise SettingsError(f"{name}_FILE={path!r} cannot be read: {e}") from None
    return env.get(name) or None


@dataclass(frozen=True)
class PlacementSettings:
    repo_url: str
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
    default_branch: str = "main"  # the branch whose environments/ lists the environments
    instance: str = ""  # who we are in commit trailers and logs: host/pid

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> PlacementSettings:
        env = os.environ if env is None else env
        repo_url = env.get("PHRAME_REPO_URL") or ""
        if not repo_url:
            raise SettingsError("PHRAME_REPO_URL is not set (path of the bare repo, or its clone URL)")
        git_host = env.get("PHRAME_GIT_HOST") or "local"
        if git_host not in ("local", "gitlab"):
            raise SettingsError(f"PHRAME_GIT_HOST={git_host!r} must be local or gitlab")
        settings = cls(
            repo_url=repo_url,
            git_host=git_host,
            node_timeout_s=_number(env, "PHRAME_NODE_TIMEOUT_S", 20.0, minimum=0.1),
            reschedule_after_s=_number(env, "PHRAME_RESCHEDULE_AFTER_S", 60.0, minimum=0.0),
            node_gc_s=_number(env, "PHRAME_NODE_GC_S", 86400.0, minimum=1.0),
            interval_s=_number(env, "PHRAME_PLACEMENT_INTERVAL_S", 10.0, minimum=0.05),
            lock_file=Path(env["PHRAME_LOCK_FILE"]) if env.get("PHRAME_LOCK_FILE") else None,
            state_dir=Path(env.get("PHRAME_STATE_DIR") or DEFAULT_STATE_DIR),
            topic_prefix=env.get("PHRAME_TOPIC_PREFIX") or "phrame",
            gitlab_url=env.get("PHRAME_GITLAB_URL") or None,
            gitlab_token=_secret(env, "PHRAME_GITLAB_TOKEN"),
            gitlab_project=env.get("PHRAME_GITLAB_PROJECT") or None,
            default_branch=env.get("PHRAME_DEFAULT_BRANCH") or "main",
            instance=f"{os.uname().nodename}/{os.getpid()}",
        )
        if git_host == "gitlab" and not (settings.gitlab_url and settings.gitlab_project):
            raise SettingsError("PHRAME_GIT_HOST=gitlab needs PHRAME_GITLAB_URL and PHRAME_GITLAB_PROJECT")
        return settings

    @property
    def clone_cache(self) -> Path:
        return self.state_dir / "placement" / "repo.git"

    def authenticated_url(self) -> str:
        """The clone URL, with the GitLab token as HTTPS credentials when one is set."""
        parts = urlsplit(self.repo_url)
        if (
            self.git_host != "gitlab"
            or not self.gitlab_token
            or parts.scheme != "https"
            or "@" in parts.netloc
        ):
            return self.repo_url
        netloc = f"oauth2:{quote(self.gitlab_token, safe='')}@{parts.netloc}"
        return urlunsplit(parts._replace(netloc=netloc))
