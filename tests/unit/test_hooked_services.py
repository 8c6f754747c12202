"""The fault suite's hooks (tests/support/hooked_services.py): the file pause and the offset clock."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

from tests.support.hooked_services import POLL_S, FilePause, OffsetClock
from tests.support.waiting import wait_for


def test_without_the_file_the_pause_returns_at_once(tmp_path: Path) -> None:
    FilePause(tmp_path / "pause")()
    assert not (tmp_path / "pause.reached").exists()


def test_with_the_file_it_says_so_and_waits_until_the_file_is_removed(tmp_path: Path) -> None:
    pause = tmp_path / "pause"
    pause.touch()
    done = threading.Event()

    def paused() -> None:
        FilePause(pause)()
        done.set()

    t = threading.Thread(target=paused)
    t.start()
    wait_for((tmp_path / "pause.reached").exists, "the pause to be reached", 5)
    assert (tmp_path / "pause.reached").read_text() == str(os.getpid())
    time.sleep(POLL_S * 3)  # several polls of the file: still paused
    assert not done.is_set()
    pause.unlink()
    t.join(5)
    assert done.is_set()


def test_the_offset_clock_is_the_hosts_shifted() -> None:
    assert abs(OffsetClock(-600)() - (time.time() - 600)) < 1
    assert abs(OffsetClock(0)() - time.time()) < 1
