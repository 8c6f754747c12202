"""Where the mirrors tell the topic API of each change: one datagram socket per snapshot folder.

``mirror.notices`` (the sender) and ``topic_api.notices`` (the receiver) call
:func:`notice_address` with the snapshot folder, so both find the same socket: a file
``.notices.sock`` in the folder (as private as the folder), or, where that path is too
long for a Unix socket, an abstract name derived from the folder. Pure: never opens a socket.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

SOCKET_NAME = ".notices.sock"
MAX_PATH = 100  # sun_path holds 108 bytes on Linux; keep a margin
#: the largest notice the mirror sends with its payload; a larger change waits for the snapshot
MAX_NOTICE = 60_000


def notice_address(folder: Path) -> str:
    """The socket address (a path, or ``\\0``-prefixed abstract name) of ``folder``'s notices."""
    path = str(folder / SOCKET_NAME)
    if len(os.fsencode(path)) <= MAX_PATH:
        return path
    digest = hashlib.sha256(os.fsencode(os.path.realpath(folder))).hexdigest()[:24]
    return f"\0phrame-mirror-{digest}"
