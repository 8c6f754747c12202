"""The node agent's test-only clock offset (fault case 7): nothing when unset, a clear error when bad."""

from __future__ import annotations

import importlib
import time

import pytest

from node_agent import test_clock


def reloaded(monkeypatch: pytest.MonkeyPatch, value: str | None):
    if value is None:
        monkeypatch.delenv(test_clock.ENV, raising=False)
    else:
        monkeypatch.setenv(test_clock.ENV, value)
    return importlib.reload(test_clock)


def test_unset_it_is_the_hosts_clock_and_set_it_shifts_it(monkeypatch: pytest.MonkeyPatch) -> None:
    try:
        assert abs(reloaded(monkeypatch, None).wall_time() - time.time()) < 1
        assert abs(reloaded(monkeypatch, "-600").wall_time() - (time.time() - 600)) < 1
    finally:
        reloaded(monkeypatch, None)


def test_a_bad_offset_stops_the_agent_naming_the_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    try:
        with pytest.raises(ValueError, match="PHRAME_TEST_CLOCK_OFFSET_S='soon' is not a number"):
            reloaded(monkeypatch, "soon")
    finally:
        reloaded(monkeypatch, None)
