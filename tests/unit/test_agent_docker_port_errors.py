"""DockerPort converts what the Docker SDK raises, and only that: a programming error
(a wrong argument, a bug in our own code) leaves as itself, so the executor logs it with
its traceback instead of reporting a permanent DockerError. No daemon is needed: the
client points at a port nothing listens on."""

from __future__ import annotations

from collections.abc import Iterator

import docker
import pytest

from node_agent.docker_port import DockerPort
from node_agent.errors import DockerError
from tests.support.services import free_port


@pytest.fixture
def port() -> Iterator[DockerPort]:
    nowhere = docker.DockerClient(base_url=f"tcp://127.0.0.1:{free_port()}", version="1.41")
    try:
        yield DockerPort("node-a", client=nowhere, attempts=1)
    finally:
        nowhere.close()


def test_a_programming_error_is_not_disguised_as_a_docker_error(port: DockerPort) -> None:
    # the SDK's own TypeError for a wrong keyword: our bug, not Docker's answer
    with pytest.raises(TypeError):
        port._call("list containers", port.api.containers, everything=True)


def test_an_unreachable_daemon_is_still_a_transient_docker_error(port: DockerPort) -> None:
    with pytest.raises(DockerError) as caught:
        port.list_containers()
    assert caught.value.transient and "Docker unreachable" in str(caught.value)
