"""Fixtures shared by the integration tests (the session-wide ones are in tests/conftest.py)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import docker.errors
import pytest

from phrame.mqtt import MqttClient
from tests.support.agent_support import ActualWatcher, AgentEnv


@pytest.fixture
def clients() -> Iterator[list[MqttClient]]:
    """MQTT clients a test started (it appends them); all are stopped afterwards."""
    started: list[MqttClient] = []
    yield started
    for c in started:
        c.stop()


@pytest.fixture
def env(docker_client, busybox_image, docker_cleanup) -> Iterator[AgentEnv]:
    """A node-agent test environment: a unique node name and environment on the one daemon.

    The containers an agent creates carry its node's labels, not the test label, so they are
    removed here by this environment's unique node name (``docker_cleanup`` misses them)."""
    agent_env = AgentEnv(docker_client, busybox_image, docker_cleanup)
    yield agent_env
    for c in agent_env.managed():
        with contextlib.suppress(docker.errors.NotFound):  # gone meanwhile (its agent removed it)
            c.remove(force=True)


@pytest.fixture
def watcher(mosquitto, env: AgentEnv) -> Iterator[ActualWatcher]:
    """Follows the actual plane of ``env``'s node on the test broker."""
    w = ActualWatcher(mosquitto.url, env.node)
    yield w
    w.stop()
