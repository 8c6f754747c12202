"""The dev stack's only Docker adapter: is a daemon there, the quickstart image, clean-up.

The supervisor asks :func:`connect` once; ``--down`` calls :func:`remove_nodes_objects`.
It removes only containers and networks labelled ``io.phrame.managed=true`` whose
``io.phrame.node`` is one of the dev stack's nodes, never anything else on the daemon.
"""

from __future__ import annotations

import io
import os
import subprocess
import tarfile
import time

import docker
import docker.errors
import requests

from dev_stack.errors import DevError

BUSYBOX = "/bin/busybox"
MANAGED, NODE = "io.phrame.managed", "io.phrame.node"


def connect() -> docker.DockerClient | None:
    """A client whose daemon answered a ping, or None (no daemon: processes only)."""
    host = os.environ.get("DOCKER_HOST", "unix:///var/run/docker.sock")
    if host.startswith("unix://") and not os.path.exists(host.removeprefix("unix://")):
        return None  # docker-py would leak a socket failing to connect
    try:
        client = docker.from_env(timeout=60)
        client.ping()
    except (docker.errors.DockerException, requests.RequestException):
        return None
    return client


def busybox_tar(busybox: str = BUSYBOX) -> bytes:
    """A root file system: /bin/busybox, a /bin symlink per applet, /etc/passwd, /tmp, /www."""
    applets = subprocess.run([busybox, "--list"], capture_output=True, text=True, check=True)
    buf = io.BytesIO()
    now = int(time.time())
    with tarfile.open(fileobj=buf, mode="w") as tar:

        def add(name: str, *, kind: bytes, mode: int, data: bytes = b"", link: str = "") -> None:
            info = tarfile.TarInfo(name)
            info.type, info.mode, info.mtime, info.linkname = kind, mode, now, link
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data) if data else None)

        for directory in ("bin", "etc", "www"):
            add(directory, kind=tarfile.DIRTYPE, mode=0o755)
        add("tmp", kind=tarfile.DIRTYPE, mode=0o1777)
        with open(busybox, "rb") as f:
            add("bin/busybox", kind=tarfile.REGTYPE, mode=0o755, data=f.read())
        for applet in sorted(set(applets.stdout.split()) - {"busybox"}):
            add(f"bin/{applet}", kind=tarfile.SYMTYPE, mode=0o777, link="busybox")
        passwd = b"root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/:/bin/false\n"
        add("etc/passwd", kind=tarfile.REGTYPE, mode=0o644, data=passwd)
        add("etc/group", kind=tarfile.REGTYPE, mode=0o644, data=b"root:x:0:\nnogroup:x:65534:\n")
    return buf.getvalue()


def ensure_image(client: docker.DockerClient, tag: str) -> bool:
    """Import ``tag`` from busybox-static unless present; True when it was built now."""
    try:
        client.images.get(tag)
        return False
    except docker.errors.ImageNotFound:
        pass
    if not os.path.exists(BUSYBOX):
        raise DevError(f"{BUSYBOX} is missing: install the Debian package busybox-static (make deps)")
    repository, _, version = tag.rpartition(":")
    client.api.import_image_from_data(
        busybox_tar(), repository=repository, tag=version, changes=["ENV PATH=/bin"]
    )
    client.images.get(tag)  # ImageNotFound here means the import produced nothing
    return True


def _ours(labels: dict[str, str] | None, nodes: tuple[str, ...]) -> bool:
    labels = labels or {}
    return labels.get(MANAGED) == "true" and labels.get(NODE) in nodes


def publishes_port(client: docker.DockerClient, nodes: tuple[str, ...], port: int) -> bool:
    """True when one of our nodes' containers holds host ``port`` (a second start reuses it)."""
    for c in client.containers.list(filters={"label": f"{MANAGED}=true"}, ignore_removed=True):
        if _ours(c.labels, nodes):
            for bindings in (c.attrs.get("HostConfig", {}).get("PortBindings") or {}).values():
                if any(str(b.get("HostPort")) == str(port) for b in bindings or ()):
                    return True
    return False


def remove_nodes_objects(client: docker.DockerClient, nodes: tuple[str, ...]) -> list[str]:
    """Force-remove our nodes' managed containers, then their networks; the names removed."""
    removed: list[str] = []
    # ignore_removed: on a shared daemon another stack removes its own containers meanwhile
    found = client.containers.list(all=True, filters={"label": f"{MANAGED}=true"}, ignore_removed=True)
    for c in found:
        if _ours(c.labels, nodes):
            try:
                c.remove(force=True, v=True)
                removed.append(f"container {c.name}")
            except docker.errors.NotFound:
                pass
    for n in client.networks.list(filters={"label": f"{MANAGED}=true"}):
        if _ours(n.attrs.get("Labels"), nodes):
            try:
                n.remove()
                removed.append(f"network {n.name}")
            except docker.errors.NotFound:
                pass
            except docker.errors.APIError as e:  # still used by a container that is not ours
                removed.append(f"network {n.name} NOT removed: {e.explanation or e}")
    return removed
