"""The review environments of one GitLab project: a merge request's preview as GitLab
environment ``review/<env>-mr-<iid>``, made once, stopped when the preview is.

config-sync's :mod:`config_sync.previews.gitlab_review` calls it. GitLab's Environments API
cannot set ``auto_stop_in`` (only a CI job's ``environment:auto_stop_in`` does): the
environment is created with ``auto_stop_setting: always`` (stoppable without a stop job,
GitLab 17.8+; an older GitLab ignores the field) and phrame stops it itself after
``auto_stop_h`` (``POST /projects/:id/environments/:environment_id/stop``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from phrame.gitlab.errors import GitLabError, converting


@dataclass(frozen=True)
class Environment:
    id: int
    name: str
    state: str
    web_url: str | None = None


class Environments:
    """Reached as ``GitLabProject(...).environments``; ``project`` is python-gitlab's."""

    def __init__(self, project: Any, where: str, web: str | None = None) -> None:
        self._project = project
        self._where = where
        self._web = web.rstrip("/") if web else None  # the project's page: ``<url>/<group>/<name>``

    def find(self, name: str) -> Environment | None:
        """The environment called ``name`` (``GET /projects/:id/environments?name=``), or None."""
        with converting(f"find environment {name}", self._where):
            found = self._project.environments.list(name=name, get_all=False, per_page=20)
        for env in found:
            if getattr(env, "name", None) == name:
                return self._of(env)
        return None

    def ensure(self, name: str, *, external_url: str | None = None) -> Environment:
        """The environment ``name``, created when missing (``POST /projects/:id/environments``)."""
        existing = self.find(name)
        if existing is not None:
            return existing
        data: dict[str, Any] = {"name": name, "tier": "development", "auto_stop_setting": "always"}
        if external_url:
            data["external_url"] = external_url
        with converting(f"create environment {name}", self._where):
            made = self._project.environments.create(data)
        return self._of(made)

    def stop(self, name: str) -> bool:
        """Stop ``name`` (``POST .../environments/:id/stop``); False when there is none or it
        is stopped already."""
        env = self.find(name)
        if env is None or env.state == "stopped":
            return False
        try:
            with converting(f"stop environment {name}", self._where):
                self._project.environments.get(env.id, lazy=True).stop()
        except GitLabError as e:
            if e.status == 404:
                return False
            raise
        return True

    def _of(self, env: Any) -> Environment:
        ident = int(env.id)
        web = f"{self._web}/-/environments/{ident}" if self._web else None
        return Environment(ident, str(env.name), str(getattr(env, "state", "available")), web)
