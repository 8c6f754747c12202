"""Pure helpers about Docker: which container am I, which image gets credentials, list rows.

``docker_port`` calls them (pulls, list rows, and ``find_own_container`` at start-up). They read only
the text they are given (``/proc/self/cgroup`` and ``mountinfo``, an image reference) and
never call the Docker API.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from docker.auth import resolve_repository_name
from docker.utils import parse_repository_tag

from node_agent.models import ObservedContainer
from node_agent.settings import registry_host

_EXITED = re.compile(r"Exited \((-?\d+)\)")
_HEALTH = re.compile(r"\((healthy|unhealthy|health: starting)\)")

_OWN_MOUNTS = ("/etc/hostname", "/etc/resolv.conf", "/etc/hosts")
_CONTAINER_DIR = re.compile(r"/containers/([0-9a-f]{64})/(?:hostname|resolv\.conf|hosts)$")
# cgroupfs driver: .../docker/<id>[/...]; systemd driver: .../docker-<id>.scope[/...]
_CGROUP_ID = re.compile(r"/docker(?:/|-)([0-9a-f]{64})(?:\.scope)?(?=/|$)")


def detect_own_container_id(root: Path = Path("/proc/self")) -> str | None:
    """The id of the container this process runs in, or None on a bare host.

    First its cgroup path (cgroup v1, or v2 without a private cgroup namespace): it names
    the process's own container, the deepest one when nested. Then the bind mounts Docker
    makes for ``/etc/hostname`` (or ``resolv.conf``, ``hosts``), which under
    ``--network container:<other>`` are the OTHER container's: so they come second. Other
    ``/var/lib/docker/containers/<id>/...`` mounts never count: a bare host shows them too
    (a shm of an ``--ipc shareable`` container) and must not think it is that container.
    """
    return _from_cgroup(root) or _from_mounts(root)


def _from_cgroup(root: Path) -> str | None:
    try:
        text = (root / "cgroup").read_text()
    except OSError:
        return None
    for line in text.splitlines():  # "hierarchy-id:controllers:path"
        found = _CGROUP_ID.findall(line.split(":", 2)[-1])
        if found:
            return str(found[-1])
    return None


def _from_mounts(root: Path) -> str | None:
    try:
        text = (root / "mountinfo").read_text()
    except OSError:
        return None
    for line in text.splitlines():
        fields = line.split()
        if len(fields) < 5 or fields[4] not in _OWN_MOUNTS:
            continue
        match = _CONTAINER_DIR.search(fields[3])  # the mount's root within its source
        if match:
            return match.group(1)
    return None


def root_upperdir(root: Path = Path("/proc/self")) -> str | None:
    """The host directory holding this process's writable overlay root, or None.

    Docker's overlay2 mounts a container's ``/`` with ``upperdir=<data-root>/overlay2/<x>/diff``,
    which the daemon reports as ``GraphDriver.Data.UpperDir``: an exact way to find one's own
    container. None for a root that is not overlay (a bare host, another storage driver).
    """
    try:
        text = (root / "mountinfo").read_text()
    except OSError:
        return None
    found: str | None = None
    for line in text.splitlines():  # "id parent dev root mountpoint opts... - fstype source superopts"
        pre, sep, post = line.partition(" - ")
        fields, tail = pre.split(), post.split()
        if not sep or len(fields) < 5 or fields[4] != "/" or len(tail) < 3:
            continue
        found = None  # the last mount on / is the one seen
        if tail[0] == "overlay":
            uppers = [o[len("upperdir=") :] for o in tail[2].split(",") if o.startswith("upperdir=")]
            found = uppers[0] if uppers else None
    return found


def auth_for(image: str, registry: str | None, auth: dict[str, str] | None) -> dict[str, str] | None:
    """The credentials to pull ``image`` with: ``auth`` only when the image is from ``registry``."""
    if not auth or not registry:
        return None
    repo, _tag = parse_repository_tag(image)
    try:
        host, _name = resolve_repository_name(repo)
        theirs = registry_host(host)
    except Exception:  # an unparsable reference: certainly not sent any credentials
        return None
    return auth if theirs == registry_host(registry) else None


def observed_container(row: dict[str, Any]) -> ObservedContainer:
    """One row of the container list API as an :class:`ObservedContainer`."""
    status = row.get("Status") or ""
    exited = _EXITED.search(status)
    health = _HEALTH.search(status)
    return ObservedContainer(
        id=row["Id"],
        name=(row.get("Names") or ["/?"])[0].lstrip("/"),
        state=row.get("State") or "unknown",
        labels=row.get("Labels") or {},
        image=row.get("Image"),
        image_id=row.get("ImageID"),
        health=health.group(1).replace("health: ", "") if health else None,
        exit_code=int(exited.group(1)) if exited else None,
        networks={
            str(name): str((endpoint or {}).get("NetworkID") or "")
            for name, endpoint in ((row.get("NetworkSettings") or {}).get("Networks") or {}).items()
        },
    )
