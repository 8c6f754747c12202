"""Writing one snapshot file atomically, and saying once when the disk refuses it.

:class:`SnapshotWriter` is used by the mirror loop (the bytes come from
:mod:`mirror.encoding`). A write goes to a temp file in the same
folder, is fsynced and then ``os.replace``d over the old one, so a reader sees the old file
or the new one, never half of one. It never removes or truncates the last good snapshot:
on any ``OSError`` (a full disk, a read-only folder) the temp file is removed and the
failure counted and logged once per condition until a write succeeds again.
"""

from __future__ import annotations

import contextlib
import logging
import os
import tempfile
from pathlib import Path

log = logging.getLogger(__name__)


class SnapshotWriter:
    """Writes ``path`` atomically; ``writes``/``failures`` count the outcomes."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.writes = 0
        self.failures = 0
        self.last_bytes = 0  # size of the last snapshot written (for metrics)
        self.last_error: str | None = None  # the condition last logged; None: healthy

    def write(self, data: bytes) -> bool:
        """Replace the snapshot with ``data`` (an encoded document); whether it was written."""
        tmp: str | None = None
        try:
            fd, tmp = tempfile.mkstemp(prefix=f".{self.path.name}.", suffix=".tmp", dir=self.path.parent)
            with os.fdopen(fd, "wb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, self.path)
            tmp = None
            self._fsync_dir()
        except OSError as e:
            self._failed(e)
            return False
        finally:
            if tmp is not None:  # a failed write leaves no temp file behind
                with contextlib.suppress(OSError):
                    os.unlink(tmp)
        self.writes += 1
        self.last_bytes = len(data)
        if self.last_error is not None:
            log.info("snapshot %s written again (after: %s)", self.path, self.last_error)
            self.last_error = None
        return True

    def _fsync_dir(self) -> None:
        # the rename itself must survive a crash; some filesystems refuse a directory fsync
        try:
            fd = os.open(self.path.parent, os.O_RDONLY)
        except OSError:
            return
        try:
            os.fsync(fd)
        except OSError:
            pass
        finally:
            os.close(fd)

    def _failed(self, e: OSError) -> None:
        self.failures += 1
        condition = f"{e.strerror or e} ({type(e).__name__}, errno {e.errno})"
        if condition != self.last_error:  # once per condition, not once per attempt
            log.error(
                "cannot write snapshot %s: %s; the last good snapshot stays, retrying",
                self.path,
                condition,
            )
            self.last_error = condition
