"""Running the real ``docker-compose`` in tests, and removing what a compose project made.

io.phrame.* labels are reserved in the config repo, so a file that went through an import
cannot carry the test label: the compose project name, which holds the run's id, marks
what compose creates instead, and only objects with that project label are removed.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
from pathlib import Path

import docker


def compose(
    binary: str, cwd: Path, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """``docker-compose ARGS`` in ``cwd`` with only PATH and ``env``: no variable of the test
    runner's own environment can fill the file's ``${...}``."""
    full_env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "COMPOSE_PROJECT_NAME": "phrame-export",
        **(env or {}),
    }
    return subprocess.run([binary, *args], cwd=cwd, env=full_env, capture_output=True, text=True, timeout=120)


def remove_project(client: docker.DockerClient, project: str, volume: str) -> None:
    """What compose created for ``project`` (its own label, unique to this run), if down left any.

    io.phrame.* labels are reserved in the config repo, so an imported file cannot carry the
    test label: the project name, which holds this run's id, marks these objects instead."""
    selector = {"label": f"com.docker.compose.project={project}"}
    for c in client.containers.list(all=True, filters=selector):
        c.remove(force=True)
    for n in client.networks.list(filters=selector):
        n.remove()
    with contextlib.suppress(docker.errors.NotFound):
        client.volumes.get(volume).remove(force=True)
