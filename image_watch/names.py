"""Where an image lives, as Docker reads a reference: the registry host and the repository
path (``nginx`` is ``docker.io``'s ``library/nginx``; a first part with a ``.`` or ``:``, or
``localhost``, is a host). And the branch that proposes one update. Pure."""

from __future__ import annotations

import re

DOCKER_HUB = "docker.io"
DOCKER_HUB_API = "registry-1.docker.io"
UNSAFE = re.compile(r"[^A-Za-z0-9._-]")


def registry_and_path(repository: str) -> tuple[str, str]:
    """(``host[:port]``, repository path) of an image's repository (no tag, no digest)."""
    first, _, rest = repository.partition("/")
    if rest and ("." in first or ":" in first or first == "localhost"):
        host, path = first, rest
    else:
        host, path = DOCKER_HUB, repository
    if host == DOCKER_HUB and "/" not in path:
        path = f"library/{path}"
    return host, path


def api_host(host: str) -> str:
    """The host the v2 API answers on (Docker Hub's is not ``docker.io``)."""
    return DOCKER_HUB_API if host in (DOCKER_HUB, "index.docker.io") else host


def update_branch(env: str, service: str, tag: str) -> str:
    """``image-update/<env>/<service>/<tag>``: one branch per update, so an existing one means
    proposed already. A tag's ``..`` (legal in a tag, not in a ref) becomes ``._``."""
    safe = UNSAFE.sub("_", tag).replace("..", "._")
    return f"image-update/{env}/{service}/{safe}"
