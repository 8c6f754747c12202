"""Throw-away X.509 certificates for TLS tests, made with the ``openssl`` command.

A test calls :func:`make_pki` for a CA, a server certificate (names chosen by the test,
so a host name mismatch can be provoked) and a client certificate. Files live in a
temporary directory; nothing touches the system trust store.
"""

from __future__ import annotations

import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from tests.support.services import require_binary


@dataclass(frozen=True)
class Pki:
    dir: Path
    ca: Path
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path


def _openssl(*args: str | Path) -> None:
    subprocess.run(
        [require_binary("openssl", "openssl"), *map(str, args)],
        check=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )


def _leaf(d: Path, name: str, subject: str, ext: str, ca: Path, ca_key: Path) -> None:
    key, csr, crt, extfile = (d / f"{name}.{s}" for s in ("key", "csr", "crt", "ext"))
    _openssl("req", "-new", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", csr,
             "-subj", subject)  # fmt: skip
    extfile.write_text(ext)
    _openssl("x509", "-req", "-in", csr, "-CA", ca, "-CAkey", ca_key, "-CAcreateserial",
             "-out", crt, "-days", "2", "-sha256", "-extfile", extfile)  # fmt: skip


def make_pki(
    server_names: tuple[str, ...] = ("localhost", "127.0.0.1"), *, directory: Path | None = None
) -> Pki:
    """A CA, a server certificate for ``server_names`` (DNS names or IPs), a client cert."""
    d = directory or Path(tempfile.mkdtemp(prefix="phrame-pki-"))
    d.mkdir(parents=True, exist_ok=True)
    ca, ca_key = d / "ca.crt", d / "ca.key"
    _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", ca_key, "-out", ca,
             "-days", "2", "-subj", "/CN=phrame-test-ca")  # fmt: skip
    sans = ",".join(f"IP:{n}" if n.replace(".", "").isdigit() else f"DNS:{n}" for n in server_names)
    _leaf(d, "server", f"/CN={server_names[0]}",
          f"subjectAltName={sans}\nextendedKeyUsage=serverAuth\n", ca, ca_key)  # fmt: skip
    _leaf(d, "client", "/CN=phrame-test-client", "extendedKeyUsage=clientAuth\n", ca, ca_key)
    for key in d.glob("*.key"):
        key.chmod(0o644)  # mosquitto may drop privileges before reading it
    return Pki(d, ca, d / "server.crt", d / "server.key", d / "client.crt", d / "client.key")
