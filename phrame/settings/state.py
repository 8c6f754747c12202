"""Private state on disk: each service's folder under ``PHRAME_STATE_DIR`` is its owner's alone.

config-sync (its clone cache), placement (its clone cache) and the node agent (process
logs and records) call :func:`private_dir` where they create their folder, and their
commands call :func:`use_private_umask` once at start, so what they and their git
children write later is 0600/0700 too. It never changes the mode of a folder it did not
create above the service's own one (the state dir a user gave is theirs to set).
"""

from __future__ import annotations

import logging
import os
import stat
import threading
from pathlib import Path

log = logging.getLogger(__name__)

PRIVATE_UMASK = 0o077  # files 0600, folders 0700
_OPEN = 0o077  # group and other bits
_lock = threading.Lock()
_checked: set[Path] = set()
_inherited_umask: int | None = None


def use_private_umask() -> None:
    """Make every file this process (and git, its child) creates private from now on.

    Called by the service commands only, never on import: a library user keeps its umask.
    Processes the agent supervises get the umask the agent started with back
    (:func:`inherited_umask`)."""
    global _inherited_umask
    previous = os.umask(PRIVATE_UMASK)
    if _inherited_umask is None:
        _inherited_umask = previous


def inherited_umask() -> int:
    """The umask this process started with (for children that are not ours to restrict);
    -1 (Popen's "leave it") before :func:`use_private_umask`."""
    return -1 if _inherited_umask is None else _inherited_umask


def private_dir(path: str | os.PathLike[str]) -> Path:
    """Create ``path`` with mode 0700 (missing parents too), or tighten an existing one.

    An existing folder with group or other access is tightened once per process, with
    everything inside it (a clone cache written under an older, looser umask), and said
    once in the log. Folders above ``path`` that already exist are left as they are."""
    folder = Path(path)
    missing = [p for p in (folder, *folder.parents) if not p.exists()]
    for p in reversed(missing):
        try:
            p.mkdir(mode=0o700)
        except FileExistsError:  # created meanwhile by another thread or service
            continue
        p.chmod(0o700)  # mkdir's mode passes through the umask; say it exactly
    with _lock:
        if folder in _checked:
            return folder
        _checked.add(folder)
    loosened = _tighten(folder)
    if loosened:
        log.warning(
            "state folder %s was readable by other users (%d entries); made it private (0700/0600)",
            folder,
            loosened,
        )
    return folder


def _tighten(folder: Path) -> int:
    """Remove group/other bits below and at ``folder``; how many entries had them.
    Symbolic links are not followed (their targets are not ours to change)."""
    count = _strip(folder)
    for root, dirs, files in os.walk(folder):
        for name in (*dirs, *files):
            count += _strip(Path(root) / name)
    return count


def _strip(p: Path) -> int:
    try:
        st = p.lstat()
        if stat.S_ISLNK(st.st_mode) or not st.st_mode & _OPEN:
            return 0
        p.chmod(stat.S_IMODE(st.st_mode) & ~_OPEN)
    except FileNotFoundError:  # removed meanwhile (git gc, a finished process)
        return 0
    except PermissionError:  # another user's file: not ours to change (nor to read, then)
        return 0
    return 1
