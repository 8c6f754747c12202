"""Reading ``env: {KEY: {file: NAME}}`` secrets on this host, from ``PHRAME_SECRETS_DIR`` only.

Called by ``container_config.resolve_env`` (containers and host processes) each time an item
is created or started. A name comes from git through MQTT, so it is hostile input: it may
only reach a regular file inside the secrets folder (after resolving links), of at most
``MAX_SECRET_BYTES``, in UTF-8. Anything else is a :class:`SpecError` for that one item.
It never blocks (FIFOs, devices), never reads without bound, and never logs a secret's content.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from node_agent.errors import SpecError

DEFAULT_SECRETS_DIR = Path("/etc/phrame/secrets")
MAX_SECRET_BYTES = 64 * 1024
_KINDS = {
    stat.S_IFDIR: "a directory",
    stat.S_IFIFO: "a FIFO",
    stat.S_IFSOCK: "a socket",
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
    stat.S_IFLNK: "a symbolic link",
}
# O_NONBLOCK: opening a FIFO with no writer would otherwise wait forever; O_NOFOLLOW: the last
# part is resolved already, so a link swapped in after the check is refused, not followed
_FLAGS = os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_NOCTTY | os.O_CLOEXEC


def secret_path(secrets_dir: Path, name: str) -> Path:
    """The real path ``name`` (relative to ``secrets_dir``, or absolute inside it) stands
    for, with links resolved; SpecError when it lies outside the folder."""
    if not name or "\x00" in name:
        raise SpecError(f"{name!r} is no file name")
    root = Path(os.path.realpath(secrets_dir))
    # an absolute name is accepted inside the folder: payloads of an older config-sync
    # still carry /etc/phrame/secrets/... paths (the repo schema now asks for a name)
    real = Path(os.path.realpath(secrets_dir / name))
    if real != root and root not in real.parents:
        raise SpecError(f"{name!r} is outside PHRAME_SECRETS_DIR ({secrets_dir}), after resolving links")
    return real


def _read_at_most(fd: int, limit: int) -> bytes:
    chunks: list[bytes] = []
    size = 0
    while size < limit:
        chunk = os.read(fd, limit - size)
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
    return b"".join(chunks)


def read_secret(secrets_dir: Path, name: str, *, max_bytes: int = MAX_SECRET_BYTES) -> str:
    """The text of secret ``name``, one trailing newline dropped. SpecError says why not."""
    path = secret_path(secrets_dir, name)
    try:
        fd = os.open(path, _FLAGS)
    except OSError as e:
        raise SpecError(f"cannot read {path}: {e.strerror}") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            kind = _KINDS.get(stat.S_IFMT(info.st_mode), "not a regular file")
            raise SpecError(f"cannot read {path}: {kind}, not a regular file")
        if info.st_size > max_bytes:
            raise SpecError(f"cannot read {path}: {info.st_size} bytes, more than the {max_bytes} allowed")
        data = _read_at_most(fd, max_bytes + 1)  # one byte more: a file grown since fstat
    except OSError as e:
        raise SpecError(f"cannot read {path}: {e.strerror}") from None
    finally:
        os.close(fd)
    if len(data) > max_bytes:
        raise SpecError(f"cannot read {path}: more than the {max_bytes} bytes allowed")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise SpecError(f"cannot read {path}: not UTF-8 text (byte {e.start})") from None
    return text[:-1] if text.endswith("\n") else text
