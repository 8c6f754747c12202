"""The advisory lock that lets exactly one placement instance act (``PHRAME_LOCK_FILE``).

The loop takes it before its first decision and keeps it for the life of the process;
the kernel drops an ``flock`` when its holder exits or dies, so a standby that polls
every 0.1 s takes over well within a second. Never deletes the file (a waiter may hold
it open); the holder writes who it is into it for people and tests to read.
"""

from __future__ import annotations

import fcntl
import logging
import os
import threading
from pathlib import Path

from placement.errors import PlacementError

log = logging.getLogger(__name__)


class ProcessLock:
    def __init__(self, path: Path, *, owner: str, poll_s: float = 0.1) -> None:
        self.path = path
        self.owner = owner
        self.poll_s = poll_s
        self._fd: int | None = None

    @property
    def is_held(self) -> bool:
        return self._fd is not None

    def try_acquire(self) -> bool:
        if self._fd is not None:
            return True
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as e:
            raise PlacementError(f"cannot open the lock file {self.path}: {e}") from e
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return False
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{self.owner}\n".encode(), 0)
        self._fd = fd
        return True

    def holder(self) -> str:
        try:
            return self.path.read_text("utf-8").strip() or "unknown"
        except OSError:
            return "unknown"

    def acquire(self, stop: threading.Event) -> bool:
        """Block until the lock is ours (True) or ``stop`` is set (False)."""
        if self.try_acquire():
            return True
        log.info("standing by: %s is held by %s", self.path, self.holder())
        while not stop.wait(self.poll_s):
            if self.try_acquire():
                log.info("took over the placement lock %s", self.path)
                return True
        return False

    def release(self) -> None:
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None
