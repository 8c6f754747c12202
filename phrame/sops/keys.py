"""age keys: making one (private file 0600, public recipient), reading a private key file.

The private key file is refused when its group or others may read it (the agent will not
start); a message never quotes the file's content.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path

import pyrage


class AgeKeyError(Exception):
    """A key file that cannot be used: missing, unreadable, too open, or holding no age key."""


@dataclass(frozen=True)
class AgeKeys:
    """The age identities of one key file, and their public recipients."""

    path: Path
    identities: tuple[pyrage.x25519.Identity, ...]

    @property
    def recipients(self) -> frozenset[str]:
        return frozenset(str(i.to_public()) for i in self.identities)


def generate(path: Path) -> str:
    """Write a new age private key to ``path`` (0600, created exclusively) and return its
    public recipient (``age1...``)."""
    identity = pyrage.x25519.Identity.generate()
    recipient = str(identity.to_public())
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(f"# public key: {recipient}\n{identity}\n")
    return recipient


def ensure(path: Path) -> str:
    """The recipient of the key at ``path``, generating the key first when there is none."""
    if not path.exists():
        return generate(path)
    keys = load(path)
    return sorted(keys.recipients)[0]


def load(path: Path) -> AgeKeys:
    """The identities of an age key file (``AGE-SECRET-KEY-1...`` lines; ``#`` comments).

    Refused when the file is group- or world-accessible (it must be 0600 or 0400), is no
    regular file, or holds no key."""
    try:
        info = os.stat(path)
    except OSError as e:
        raise AgeKeyError(f"PHRAME_AGE_KEY_FILE {path}: {e.strerror}") from None
    if not stat.S_ISREG(info.st_mode):
        raise AgeKeyError(f"PHRAME_AGE_KEY_FILE {path}: not a regular file")
    if info.st_mode & 0o077:
        mode = stat.S_IMODE(info.st_mode)
        raise AgeKeyError(
            f"PHRAME_AGE_KEY_FILE {path} has mode {mode:04o}: its group or others may read the "
            f"private key; make it 0600 (chmod 600 {path}) and keep it to the agent's user"
        )
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise AgeKeyError(f"PHRAME_AGE_KEY_FILE {path}: cannot read it ({e.__class__.__name__})") from None
    identities = []
    for number, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        try:
            identities.append(pyrage.x25519.Identity.from_str(line))
        except Exception:  # pyrage's IdentityError: the line is not quoted, it is a key
            raise AgeKeyError(f"PHRAME_AGE_KEY_FILE {path}: line {number} is no age private key") from None
    if not identities:
        raise AgeKeyError(f"PHRAME_AGE_KEY_FILE {path}: holds no age private key (AGE-SECRET-KEY-1...)")
    return AgeKeys(path, tuple(identities))
