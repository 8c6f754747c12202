"""``phrame node-agent`` running INSIDE a Docker container, for own-container tests.

No image registry is needed: the container is the imported busybox image with the host's
``/usr``, ``/lib*``, the Python install, the venv and this repo bind-mounted read-only
(same paths), the Docker socket, and a read-write state directory. Network mode is
``host`` so the agent reaches the test broker on 127.0.0.1. It never removes anything
itself: the caller's test label makes ``docker_cleanup`` remove the container.
"""

from __future__ import annotations

import contextlib
import os
import sys
from pathlib import Path
from typing import Any

import docker
import docker.errors

from tests.support.docker import DEFAULT_HOST, TEST_LABEL
from tests.support.services import require

REPO_ROOT = Path(__file__).resolve().parents[2]
CONTAINER_SOCKET = "/var/run/docker.sock"


def host_socket() -> str:
    """The host path of the Docker daemon's unix socket (skips for a TCP daemon)."""
    url = os.environ.get("DOCKER_HOST", DEFAULT_HOST)
    require(url.startswith(("unix://", "/")), f"DOCKER_HOST={url}: the agent container needs a unix socket")
    return url.removeprefix("unix://")


def read_only_paths() -> list[tuple[str, str]]:
    """(host path, container path) pairs the agent's Python needs, without nested duplicates.

    On a merged-usr host ``/lib`` and ``/lib64`` are symlinks into ``/usr``: their targets
    are mounted at the link's path, since the busybox image has neither.
    """
    pairs: list[tuple[str, str]] = [("/usr", "/usr")]
    for link in ("/lib", "/lib64"):
        if os.path.exists(link):
            pairs.append((os.path.realpath(link), link))
    for path in (REPO_ROOT, Path(sys.prefix), Path(sys.base_prefix), Path(sys.executable).resolve().parent):
        real = str(path.resolve())
        if not any(real == target or real.startswith(target.rstrip("/") + "/") for _h, target in pairs):
            pairs.append((real, real))
    return pairs


def managed_labels(node: str, env: str, service: str, replica: int, test_label: str) -> dict[str, str]:
    """The labels the agent puts on a container it manages (docs/architecture/contracts.md), and the test's."""
    return {
        "io.phrame.managed": "true",
        "io.phrame.node": node,
        "io.phrame.environment": env,
        "io.phrame.service": service,
        "io.phrame.replica": str(replica),
        TEST_LABEL: test_label,
    }


def start_agent_container(
    client: docker.DockerClient,
    image: str,
    *,
    name: str,
    labels: dict[str, str],
    state_dir: Path,
    environment: dict[str, str],
    network_mode: str = "host",
    cgroupns: str | None = None,
) -> Any:
    """Run ``<venv>/bin/python -m phrame node-agent`` in a new container; returns it (started).

    ``network_mode`` must leave 127.0.0.1 the host's: ``host``, or ``container:<id>`` of a
    host-network container. ``cgroupns`` None keeps the daemon's default (``host`` on
    cgroup v1, ``private`` on v2).
    """
    state_dir.mkdir(parents=True, exist_ok=True)
    volumes = {host: {"bind": target, "mode": "ro"} for host, target in read_only_paths()}
    volumes[host_socket()] = {"bind": CONTAINER_SOCKET, "mode": "rw"}
    volumes[str(state_dir)] = {"bind": str(state_dir), "mode": "rw"}
    env = {
        # the host's git (under the mounted /usr): `phrame` imports GitPython, which needs it
        "PATH": "/bin:/usr/bin",
        "PYTHONPATH": str(REPO_ROOT),  # this checkout, whatever the venv's editable install says
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONUNBUFFERED": "1",
        "DOCKER_HOST": f"unix://{CONTAINER_SOCKET}",
        "PHRAME_STATE_DIR": str(state_dir),
        **environment,
    }
    python = str(Path(sys.prefix) / "bin" / "python")
    return client.containers.run(
        image,
        [python, "-m", "phrame", "node-agent"],
        name=name,
        labels=labels,
        environment=env,
        volumes=volumes,
        working_dir=str(REPO_ROOT),
        network_mode=network_mode,
        cgroupns=cgroupns,
        restart_policy={"Name": "no"},
        detach=True,
    )


def stop_quietly(container: Any, timeout: int = 15) -> None:
    """SIGTERM the agent (it then publishes offline); a vanished container is fine."""
    with contextlib.suppress(docker.errors.NotFound):
        container.stop(timeout=timeout)


def logs(container: Any) -> str:
    try:
        return bytes(container.logs(stdout=True, stderr=True)).decode(errors="replace")
    except docker.errors.NotFound:
        return "<container gone>"
