"""The real Docker daemon for tests: a client, a tiny busybox image, and cleanup by label.

Every container, network and volume a test creates carries ``TEST_LABEL=<run id>`` so
:func:`cleanup` can remove exactly that run's objects; it must never touch an object
without the label value it is given (other sessions may share the one daemon).
"""

from __future__ import annotations

import os
import socket
import struct
import uuid
from typing import Any

import docker
import docker.errors
import requests

from dev_stack.docker_host import busybox_tar  # the image phrame dev builds is the same
from tests.support.services import require

TEST_LABEL = "io.phrame.test"
#: One value per pytest session (pid + random), so parallel sessions never clean each other.
RUN_ID = f"run-{os.getpid()}-{uuid.uuid4().hex[:8]}"
BUSYBOX = "/bin/busybox"
BUSYBOX_TAG = "phrame-test/busybox:latest"
DEFAULT_HOST = "unix:///var/run/docker.sock"


def labels(value: str = RUN_ID) -> dict[str, str]:
    """The labels to put on every Docker object a test creates."""
    return {TEST_LABEL: value}


def unix_socket_answers(url: str) -> bool:
    """False when ``url`` is a unix socket nobody accepts on (True for other schemes).

    docker-py leaks its socket when a unix connect fails, which pytest (warnings as
    errors) reports as an error at exit, so the socket is probed here first.
    """
    if not url.startswith(("unix://", "/")):
        return True
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(5)
        try:
            sock.connect(url.removeprefix("unix://"))
        except OSError:
            return False
    return True


def try_docker_client(base_url: str | None = None) -> docker.DockerClient | None:
    """A client whose daemon answered a ping, or None."""
    if not unix_socket_answers(base_url or os.environ.get("DOCKER_HOST", DEFAULT_HOST)):
        return None
    client: docker.DockerClient | None = None
    try:
        client = docker.DockerClient(base_url=base_url) if base_url else docker.from_env()
        client.ping()
    except (docker.errors.DockerException, requests.RequestException):
        if client is not None:
            client.close()
        return None
    return client


def docker_client(base_url: str | None = None) -> docker.DockerClient:
    """A docker-py client; skips the test (fails under PHRAME_REQUIRE_SERVICES=1) without one."""
    client = try_docker_client(base_url)
    target = base_url or os.environ.get("DOCKER_HOST", DEFAULT_HOST)
    require(client is not None, f"no Docker daemon answers at {target} (scripts/ensure-dockerd)")
    assert client is not None
    return client


def is_static_elf(path: str) -> bool:
    """True when ``path`` is an ELF64 binary with no PT_INTERP (no dynamic loader needed)."""
    with open(path, "rb") as f:
        head = f.read(64)
        if head[:4] != b"\x7fELF" or head[4] != 2:
            return False
        endian = "<" if head[5] == 1 else ">"
        (phoff,) = struct.unpack_from(endian + "Q", head, 0x20)
        phentsize, phnum = struct.unpack_from(endian + "HH", head, 0x36)
        f.seek(phoff)
        table = f.read(phentsize * phnum)
    types = (struct.unpack_from(endian + "I", table, i * phentsize)[0] for i in range(phnum))
    return 3 not in types  # 3 = PT_INTERP


def busybox_image(client: docker.DockerClient, tag: str = BUSYBOX_TAG) -> str:
    """Import the busybox image as ``tag`` unless it exists; returns ``tag``.

    The image has NO CMD and NO ENTRYPOINT: every container must be given a command
    (``["sh", "-c", "..."]``, ``["sleep", "600"]``, ``["httpd", "-f", "-p", "8080"]``).
    PATH is /bin; applets are symlinks to /bin/busybox.
    """
    try:
        client.images.get(tag)
        return tag
    except docker.errors.ImageNotFound:
        pass
    require(os.path.exists(BUSYBOX), f"{BUSYBOX} missing (Debian package busybox-static)")
    require(is_static_elf(BUSYBOX), f"{BUSYBOX} is not static (install busybox-static)")
    repository, _, version = tag.rpartition(":") if ":" in tag.split("/")[-1] else (tag, "", "")
    client.api.import_image_from_data(
        busybox_tar(),
        repository=repository,
        tag=version or "latest",
        changes=["ENV PATH=/bin", "LABEL io.phrame.test-image=busybox"],
    )
    client.images.get(tag)  # raises ImageNotFound if the import did not produce the tag
    return tag


def cleanup(client: docker.DockerClient, label_value: str) -> list[str]:
    """Force-remove every container, then network and volume, labelled ``TEST_LABEL=value``.

    Returns the names removed. Objects that vanish meanwhile are ignored.
    """
    selector: dict[str, Any] = {"label": f"{TEST_LABEL}={label_value}"}
    removed: list[str] = []
    for container in client.containers.list(all=True, filters=selector):
        try:
            container.remove(force=True, v=True)
            removed.append(f"container/{container.name}")
        except docker.errors.NotFound:
            pass
    for network in client.networks.list(filters=selector):
        try:
            network.remove()
            removed.append(f"network/{network.name}")
        except docker.errors.NotFound:
            pass
    for volume in client.volumes.list(filters=selector):
        try:
            volume.remove(force=True)
            removed.append(f"volume/{volume.name}")
        except docker.errors.NotFound:
            pass
    return removed
