"""The tokens file: named holders, each with scopes and the SHA-256 of its bearer token.

``PHRAME_TOKENS_FILE`` (YAML or JSON) holds a list of ``{name, scopes, sha256}`` entries,
or ``{tokens: [...]}``; only hashes are stored, so the file is no secret by itself.
Scopes: ``read`` (full views), ``deploy`` (promote, restart; implies read), ``admin``
(everything: kv writes, imports, ``/sync``). :class:`TokenStore` re-reads the file when it
changes (a revoked token stops working without a restart); a file that no longer reads
refuses every token until it is fixed (fail closed), and says so once. A token is checked
against every entry with :func:`hmac.compare_digest`; a token is never logged.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import os
import re
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

log = logging.getLogger(__name__)

SCOPES = ("read", "deploy", "admin")
#: what each scope lets its holder do besides itself
IMPLIED = {"read": {"read"}, "deploy": {"read", "deploy"}, "admin": {"read", "deploy", "admin"}}
NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.@-]{0,63}$")
HEX = re.compile(r"^[0-9a-f]{64}$")
MAX_FILE_BYTES = 1024 * 1024


class TokensFileError(ValueError):
    """The tokens file does not read: the message names the file, the entry and what is wrong."""


@dataclass(frozen=True)
class Holder:
    """Who a token belongs to and what it may do."""

    name: str
    scopes: frozenset[str]

    def may(self, scope: str) -> bool:
        return any(scope in IMPLIED[s] for s in self.scopes)


@dataclass(frozen=True)
class _Entry:
    holder: Holder
    digest: bytes


def hash_token(token: str) -> str:
    """The hex SHA-256 of ``token`` as the tokens file stores it (surrounding blanks cut)."""
    return hashlib.sha256(token.strip().encode("utf-8", "surrogatepass")).hexdigest()


def parse_tokens(doc: Any, *, where: str = "tokens file") -> tuple[_Entry, ...]:
    """The entries of a tokens file's parsed document, or :class:`TokensFileError`."""
    if isinstance(doc, dict) and set(doc) == {"tokens"}:
        doc = doc["tokens"]
    if doc is None:
        doc = []
    if not isinstance(doc, list):
        raise TokensFileError(
            f"{where}: expected a list of {{name, scopes, sha256}} entries (or tokens: [...])"
        )
    entries: list[_Entry] = []
    names: set[str] = set()
    digests: set[str] = set()
    for i, raw in enumerate(doc, 1):
        at = f"{where}: entry {i}"
        if not isinstance(raw, dict):
            raise TokensFileError(f"{at}: expected a mapping with name, scopes and sha256")
        unknown = sorted(set(raw) - {"name", "scopes", "sha256"})
        if unknown:
            raise TokensFileError(
                f"{at}: unknown field(s) {', '.join(map(str, unknown))} (name, scopes, sha256)"
            )
        name = raw.get("name")
        if not isinstance(name, str) or not NAME.match(name):
            raise TokensFileError(f"{at}: name {name!r} is not a name ({NAME.pattern})")
        at = f"{at} ({name})"
        if name in names:
            raise TokensFileError(f"{at}: name {name!r} appears twice")
        scopes = raw.get("scopes")
        if isinstance(scopes, str):
            scopes = [scopes]
        if not isinstance(scopes, list) or not scopes or any(s not in SCOPES for s in scopes):
            raise TokensFileError(f"{at}: scopes {scopes!r} must be a non-empty list of {', '.join(SCOPES)}")
        digest = raw.get("sha256")
        if not isinstance(digest, str) or not HEX.match(digest.lower()):
            raise TokensFileError(
                f"{at}: sha256 must be the 64 hex digits of the token's SHA-256 (phrame token hash); "
                "the file holds hashes, never tokens"
            )
        digest = digest.lower()
        if digest in digests:
            raise TokensFileError(f"{at}: the same token hash appears twice (one token, one holder)")
        names.add(name)
        digests.add(digest)
        entries.append(_Entry(Holder(name, frozenset(scopes)), bytes.fromhex(digest)))
    return tuple(entries)


def load_tokens(path: Path) -> tuple[_Entry, ...]:
    """Read and check the tokens file at ``path``."""
    try:
        with path.open("rb") as f:
            raw = f.read(MAX_FILE_BYTES + 1)
    except OSError as e:
        raise TokensFileError(f"{path}: cannot read the tokens file: {e.strerror}") from e
    if len(raw) > MAX_FILE_BYTES:
        raise TokensFileError(f"{path}: the tokens file is over {MAX_FILE_BYTES} bytes")
    try:
        doc = yaml.safe_load(raw.decode("utf-8"))
    except (UnicodeDecodeError, yaml.YAMLError) as e:
        raise TokensFileError(f"{path}: not YAML or JSON: {e}") from None
    return parse_tokens(doc, where=str(path))


def _match(entries: Iterable[_Entry], token: str) -> Holder | None:
    given = hashlib.sha256(token.strip().encode("utf-8", "surrogatepass")).digest()
    found = None
    for entry in entries:  # every entry is compared: the time says nothing of which matched
        if hmac.compare_digest(entry.digest, given):
            found = entry.holder
    return found


class TokenStore:
    """The holders of a tokens file, re-read when the file changes (size, mtime or inode)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._stamp: tuple[int, int, int] | None = None
        self._entries: tuple[_Entry, ...] = load_tokens(path)  # a bad file at start-up is fatal
        self._stamp = self._stat()
        self._broken: str | None = None

    @classmethod
    def of(cls, entries: Iterable[tuple[str, Iterable[str], str]], path: Path) -> TokenStore:
        """For tests: write ``(name, scopes, token)`` entries hashed to ``path`` and load it."""
        lines = [
            {"name": name, "scopes": list(scopes), "sha256": hash_token(token)}
            for name, scopes, token in entries
        ]
        path.write_text(yaml.safe_dump(lines), encoding="utf-8")
        return cls(path)

    def _stat(self) -> tuple[int, int, int] | None:
        try:
            st = os.stat(self.path)
        except OSError:
            return None
        return (st.st_mtime_ns, st.st_size, st.st_ino)

    def _refresh(self) -> None:
        stamp = self._stat()
        if stamp == self._stamp:
            return
        self._stamp = stamp
        try:
            self._entries = load_tokens(self.path)
        except TokensFileError as e:
            self._entries = ()
            self._broken = str(e)
            log.error("tokens file no longer reads; every token is refused until it is fixed: %s", e)
            return
        if self._broken is not None:
            log.info("tokens file %s reads again (%d holder(s))", self.path, len(self._entries))
        self._broken = None

    def holder(self, token: str | None) -> Holder | None:
        """Whose ``token`` is, or None (unknown, or no token)."""
        if not token:
            return None
        with self._lock:
            self._refresh()
            entries = self._entries
        return _match(entries, token)

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)
