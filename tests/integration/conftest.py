"""Fixtures shared by the integration tests (the session-wide ones are in tests/conftest.py)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from phrame_mqtt import MqttClient


@pytest.fixture
def clients() -> Iterator[list[MqttClient]]:
    """MQTT clients a test started (it appends them); all are stopped afterwards."""
    started: list[MqttClient] = []
    yield started
    for c in started:
        c.stop()
