"""config_sync.publication.fault_point: the test-only pause between items and manifests (pure file logic)."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from config_sync.publication import fault_point
from tests.support.waiting import wait_for


def test_without_the_setting_or_the_file_it_returns_at_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delenv(fault_point.ENV, raising=False)
    fault_point.between_items_and_manifests()
    monkeypatch.setenv(fault_point.ENV, str(tmp_path / "pause"))
    fault_point.between_items_and_manifests()  # no file: no pause
    assert not (tmp_path / "pause.reached").exists()


def test_with_the_file_it_says_so_and_waits_until_the_file_is_removed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    pause = tmp_path / "pause"
    pause.touch()
    monkeypatch.setenv(fault_point.ENV, str(pause))
    done = threading.Event()

    def paused() -> None:
        fault_point.between_items_and_manifests()
        done.set()

    t = threading.Thread(target=paused)
    t.start()
    wait_for((tmp_path / "pause.reached").exists, "the pause to be reached", 5)
    time.sleep(fault_point.POLL_S * 3)  # several polls of the file: still paused
    assert not done.is_set()
    pause.unlink()
    t.join(5)
    assert done.is_set()
