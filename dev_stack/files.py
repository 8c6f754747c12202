"""Writing the state folder's files for their owner alone, whatever the process's umask.

Every module of the package that writes a file into the state folder uses
:func:`write_private`; ``phrame dev`` also sets a private umask, but a caller that does
not (a test, a library user) must not leave a world-readable password or repository behind.
"""

from __future__ import annotations

import os
from pathlib import Path


def write_private(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` with mode 0600 (also when the file existed with another);
    a symbolic link there is refused (``OSError``), never followed."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "w") as f:
        os.fchmod(f.fileno(), 0o600)
        f.write(text)
