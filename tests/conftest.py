"""Shared pytest fixtures: the real Docker daemon, mosquitto and image registry.

Fixtures skip with a reason when a service is missing (and fail under
PHRAME_REQUIRE_SERVICES=1, as .ci/run sets). Everything they start is stopped by pid;
every Docker object labelled ``TEST_LABEL=<test_label>`` is removed, never anything else.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import docker
import pytest

from tests.support import docker as docker_support
from tests.support.mosquitto import Mosquitto
from tests.support.registry import Registry

MARKERS = {
    "docker": "needs a Docker daemon",
    "mqtt": "needs mosquitto",
    "registry": "needs docker-registry",
}
# A test using one of these fixtures gets the marker, so `-m "not docker"` deselects it.
FIXTURE_MARKERS = {
    "docker_client": "docker",
    "busybox_image": "docker",
    "docker_cleanup": "docker",
    "mosquitto": "mqtt",
    "registry": "registry",
}


def pytest_configure(config: pytest.Config) -> None:
    declared = {line.split(":", 1)[0].strip() for line in config.getini("markers")}
    for name, text in MARKERS.items():
        if name not in declared:
            config.addinivalue_line("markers", f"{name}: {text}")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        names = set(getattr(item, "fixturenames", ()))
        for marker in sorted({m for f, m in FIXTURE_MARKERS.items() if f in names}):
            item.add_marker(marker)


@pytest.hookimpl(optionalhook=True)  # a pytest-xdist hook: absent under -p no:xdist
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """Under ``--dist loadgroup``, tests that share a stack or a fixture run on one worker
    (tests/support/xdist_groups.py); any other --dist keeps xdist's own scheduler."""
    if config.getoption("dist") != "loadgroup":
        return None
    from tests.support.xdist_groups import GroupScheduling

    return GroupScheduling(config, log)


@pytest.fixture(scope="session")
def docker_client() -> Iterator[docker.DockerClient]:
    """A docker-py client for the one local daemon."""
    client = docker_support.docker_client()
    yield client
    client.close()


@pytest.fixture(scope="session")
def test_label() -> Iterator[str]:
    """This session's value for the ``io.phrame.test`` label (``docker_support.labels()``).

    At session end every container, network and volume carrying it is removed.
    """
    yield docker_support.RUN_ID
    client = docker_support.try_docker_client()
    if client is not None:
        try:
            docker_support.cleanup(client, docker_support.RUN_ID)
        finally:
            client.close()


@pytest.fixture
def docker_cleanup(docker_client: docker.DockerClient, test_label: str) -> Iterator[str]:
    """Yields the label value; after the test removes every object carrying it.

    Objects a session-scoped fixture keeps across tests need another label value.
    """
    yield test_label
    docker_support.cleanup(docker_client, test_label)


@pytest.fixture(scope="session")
def busybox_image(docker_client: docker.DockerClient) -> str:
    """Tag of the imported busybox image (no CMD: always give containers a command)."""
    return docker_support.busybox_image(docker_client)


@pytest.fixture
def mosquitto() -> Iterator[Mosquitto]:
    """A fresh broker per test on a free 127.0.0.1 port (``.url``, ``.port``)."""
    broker = Mosquitto().start()
    yield broker
    proc = broker.proc
    broker.stop()
    if proc is not None and proc.stderr is not None:
        proc.stderr.close()  # Mosquitto.stop() leaves its stderr pipe open (ResourceWarning)


@pytest.fixture(scope="session")
def registry() -> Iterator[Registry]:
    """One htpasswd-protected registry for the session (``.url``, ``.auth_config``)."""
    with Registry() as running:
        yield running
