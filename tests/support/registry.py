"""A real private image registry (Debian's docker-registry) on a free 127.0.0.1 port.

It stores images in a temporary directory and demands htpasswd (bcrypt) basic auth, so
tests can prove pulls with and without credentials. Docker treats 127.0.0.0/8 registries
as insecure by default, so plain HTTP works. Started and stopped by pid, never by name.
"""

from __future__ import annotations

import base64
import json
import secrets
import shutil
import subprocess
import tempfile
import urllib.error
import urllib.request
from pathlib import Path
from types import TracebackType

from tests.support.services import free_port, require_binary, stop_process, wait_for_port


class Registry:
    """One ``docker-registry serve CONFIG`` process with one htpasswd user."""

    def __init__(self, *, username: str = "phrame", password: str | None = None) -> None:
        self.binary = require_binary("docker-registry", "docker-registry")
        self.htpasswd = require_binary("htpasswd", "apache2-utils")
        self.dir = Path(tempfile.mkdtemp(prefix="phrame-registry-"))
        self.port = free_port()
        self.username = username
        self.password = password or secrets.token_urlsafe(16)
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        """``127.0.0.1:PORT``: the registry part of an image reference."""
        return f"127.0.0.1:{self.port}"

    @property
    def auth_config(self) -> dict[str, str]:
        """Credentials in the shape docker-py's push/pull ``auth_config`` takes."""
        return {"username": self.username, "password": self.password}

    def config_text(self) -> str:
        config = {
            "version": 0.1,
            "log": {"level": "warn", "accesslog": {"disabled": True}},
            "storage": {
                "filesystem": {"rootdirectory": str(self.dir / "data")},
                "delete": {"enabled": True},
            },
            "http": {"addr": self.url, "secret": secrets.token_hex(16)},
            "auth": {"htpasswd": {"realm": "phrame-test", "path": str(self.dir / "htpasswd")}},
        }
        return json.dumps(config, indent=2) + "\n"  # JSON is YAML

    def write_htpasswd(self) -> None:
        line = subprocess.run(
            [self.htpasswd, "-niB", self.username],  # -i: password on stdin, not in argv
            input=self.password,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        (self.dir / "htpasswd").write_text(line + "\n")

    def start(self) -> Registry:
        self.write_htpasswd()
        conf = self.dir / "config.yml"
        conf.write_text(self.config_text())
        with open(self.dir / "registry.log", "ab") as log:
            self.proc = subprocess.Popen(
                [self.binary, "serve", str(conf)], stdout=log, stderr=subprocess.STDOUT
            )
        if not wait_for_port(self.port) or self.status("/v2/") != 401:
            log_text = self.log()
            self.stop()
            raise RuntimeError(f"docker-registry did not serve {self.url}: {log_text}")
        return self

    def status(self, path: str, *, auth: bool = False) -> int:
        """HTTP status of GET ``path`` (401 without credentials on /v2/ proves auth is on)."""
        return self.get(path, auth=auth)[0]

    def get(self, path: str, *, auth: bool = True) -> tuple[int, bytes]:
        request = urllib.request.Request(f"http://{self.url}{path}")
        if auth:
            token = base64.b64encode(f"{self.username}:{self.password}".encode()).decode()
            request.add_header("Authorization", f"Basic {token}")
        try:
            with urllib.request.urlopen(request, timeout=5) as response:
                return int(response.status), response.read()
        except urllib.error.HTTPError as e:
            with e:
                return int(e.code), e.read()

    def catalog(self) -> list[str]:
        """Repository names the registry holds (``/v2/_catalog``)."""
        status, body = self.get("/v2/_catalog")
        if status != 200:
            raise RuntimeError(f"registry catalog answered {status}: {body[:200]!r}")
        return list(json.loads(body).get("repositories") or [])

    def stop(self) -> None:
        """Stop the process (by pid) and delete its storage."""
        stop_process(self.proc)
        self.proc = None
        shutil.rmtree(self.dir, ignore_errors=True)

    def log(self) -> str:
        path = self.dir / "registry.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def __enter__(self) -> Registry:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
