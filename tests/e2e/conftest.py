"""Fixtures shared by the end-to-end modules: one docker-py client per module."""

from __future__ import annotations

from collections.abc import Iterator

import docker
import pytest

from tests.support.docker import docker_client


@pytest.fixture(scope="module")
def client() -> Iterator[docker.DockerClient]:
    c = docker_client()
    yield c
    c.close()
