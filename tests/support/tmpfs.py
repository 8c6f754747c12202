"""A small real disk that a test fills up: a tmpfs mounted over a folder, filled by a file.

Used by the full-disk tests of the node agent and the mirror, and by fault case 8
(``tests/faults``). Mounting needs root (or the mount capability): :func:`mount` says why
it could not, :func:`tiny_disk` skips with that reason (fails under
``PHRAME_REQUIRE_SERVICES=1``). It never unmounts a folder it did not mount.
"""

from __future__ import annotations

import errno
import os
import subprocess
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.support.services import require
from tests.support.waiting import wait_for

CHUNK = 64 * 1024
FILLER = ".test-filler"


def mount(folder: Path, size: str) -> str | None:
    """Mount a ``size`` tmpfs (mode 0700) over ``folder`` (made if missing); None when
    mounted, else why not."""
    folder.mkdir(parents=True, exist_ok=True)
    if os.geteuid() != 0:
        return "mounting a tmpfs needs root"
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size},mode=0700", "tmpfs", str(folder)],
        capture_output=True,
        text=True,
    )
    return None if done.returncode == 0 else f"cannot mount a tmpfs here: {done.stderr.strip()}"


def unmount(folder: Path, timeout: float = 10.0) -> None:
    """Unmount ``folder``, waiting (bounded) for processes that still hold a file on it."""

    def done() -> bool:
        return subprocess.run(["umount", str(folder)], capture_output=True).returncode == 0

    wait_for(done, f"{folder} to unmount (a process still holds a file on it?)", timeout, interval=0.2)


def fill(folder: Path) -> Path:
    """Write a file into ``folder`` until the disk refuses (ENOSPC); the file (delete it to
    give the space back). Fails if the disk never fills (not a small disk)."""
    filler = folder / FILLER
    block = b"\0" * CHUNK
    with open(filler, "ab", buffering=0) as f:
        for _ in range(1 << 14):  # 1 GiB at most
            try:
                f.write(block)
            except OSError as e:
                if e.errno != errno.ENOSPC:
                    raise
                break
        else:
            raise AssertionError(f"{folder} did not fill up after 1 GiB")
        # the last page may hold less than a chunk: fill it byte-wise to the end
        for size in (4096, 512, 1):
            while True:
                try:
                    f.write(b"\0" * size)
                except OSError:
                    break
    return filler


@contextmanager
def kept_full(*folders: Path, every_s: float = 0.02) -> Iterator[list[Path]]:
    """Fill each folder's disk and keep it full for the block, as a disk filling up does:
    space a writer frees (a replaced file) is taken again within ``every_s``. The files are
    deleted at the end, which gives the space back."""
    fillers = [fill(f) for f in folders]
    stop = threading.Event()

    def top_up() -> None:
        while not stop.wait(every_s):
            for filler in fillers:
                fill(filler.parent)

    thread = threading.Thread(target=top_up, name="disk-filler", daemon=True)
    thread.start()
    try:
        yield fillers
    finally:
        stop.set()
        thread.join(5)
        for filler in fillers:
            filler.unlink()


@contextmanager
def tiny_disk(folder: Path, size: str = "2m") -> Iterator[Path]:
    """``folder`` on its own ``size`` tmpfs for the block; skipped (failed under
    PHRAME_REQUIRE_SERVICES=1) where mounting is not allowed."""
    why = mount(folder, size)
    require(why is None, why or "")
    try:
        yield folder
    finally:
        unmount(folder)
