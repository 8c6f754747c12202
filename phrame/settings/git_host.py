"""Where the config repo is hosted: ``PHRAME_GIT_HOST`` and the ``PHRAME_GITLAB_*`` access.

config-sync, placement and the topic API read the same four variables the same way; each
settings class keeps its own fields (``git_host``, ``gitlab_url``, ``gitlab_token``,
``gitlab_project``) and says which values its GitLab mode needs. Never logs; the token is
read as a secret (``_FILE`` allowed) and never shown.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from phrame.settings.env import EnvReader

GIT_HOSTS = ("local", "gitlab")
REPO_URL = "a bare repository path or a clone URL"  # what PHRAME_REPO_URL holds


def git_host_fields(e: EnvReader) -> dict[str, Any]:
    """The four settings under the field names every settings class uses."""
    return {
        "git_host": e.choice("PHRAME_GIT_HOST", "local", GIT_HOSTS),
        "gitlab_url": e.text("PHRAME_GITLAB_URL"),
        "gitlab_token": e.secret("PHRAME_GITLAB_TOKEN"),
        "gitlab_project": e.text("PHRAME_GITLAB_PROJECT"),
    }


def git_host_problem(git_host: str, needed: Mapping[str, str | None]) -> str | None:
    """What is wrong with ``git_host``: not a known host, or ``gitlab`` without one of
    ``needed`` (variable name -> its value); ``None`` when nothing is."""
    if git_host not in GIT_HOSTS:
        return f"PHRAME_GIT_HOST must be local or gitlab, not {git_host!r}"
    missing = [name for name, value in needed.items() if not value]
    if git_host == "gitlab" and missing:
        return f"PHRAME_GIT_HOST=gitlab needs {', '.join(missing)}"
    return None


def proposal_branch(settings: Any, proposals: str) -> tuple[str | None, str]:
    """For a service that proposes changes on a branch (imports, image updates): what is
    wrong with its git host or ``PHRAME_TRACK_REF`` (``None`` when nothing is), and the
    tracked branch's name (``refs/heads/`` dropped, ``main`` when empty). ``settings`` has
    the four :func:`git_host_fields` fields and ``track_ref``; ``proposals`` names what it
    proposes, for the message."""
    problem = git_host_problem(
        settings.git_host,
        {
            "PHRAME_GITLAB_URL": settings.gitlab_url,
            "PHRAME_GITLAB_TOKEN": settings.gitlab_token,
            "PHRAME_GITLAB_PROJECT": settings.gitlab_project,
        },
    )
    branch = settings.track_ref.removeprefix("refs/heads/") or "main"
    if problem is None and branch.startswith("refs/"):
        problem = f"PHRAME_TRACK_REF={branch!r}: {proposals} need a branch to propose to"
    return problem, branch
