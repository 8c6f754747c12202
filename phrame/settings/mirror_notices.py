"""Where a mirror tells readers of each change: one Unix socket per plane in the snapshot folder.

``mirror.notices`` (which listens there) and ``topic_api.notices`` (which connects) call
:func:`notice_path`, so both find ``<folder>/<plane>.sock``. Connecting needs no write
access to the folder (a reader may mount it read-only). Pure: never opens a socket.
"""

from __future__ import annotations

import os
from pathlib import Path

MAX_PATH = 107  # sun_path holds 108 bytes on Linux, with its terminating NUL
#: the largest notice a mirror sends with its payload; a larger change waits for the snapshot
MAX_NOTICE = 60_000


def notice_path(folder: Path, plane: str) -> Path | None:
    """The socket of ``plane``'s notices in ``folder`` (None: the path is too long for a
    Unix socket; readers then poll the snapshot files)."""
    path = folder / f"{plane}.sock"
    return path if len(os.fsencode(path)) <= MAX_PATH else None
