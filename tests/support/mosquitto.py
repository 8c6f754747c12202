"""A real mosquitto broker on a free 127.0.0.1 port, started and stopped by pid.

Tests build one with extra configuration lines (TLS listeners, ACLs, password files);
it writes its config into a temporary directory and never touches the system broker.
"""

from __future__ import annotations

import atexit
import shutil
import subprocess
import tempfile
from pathlib import Path

from tests.support.services import free_port, require_binary, stop_process, wait_for_port


class Mosquitto:
    """One mosquitto process. ``extra`` lines are appended to the generated config.

    With ``defaults=False`` the anonymous plain listener on ``port`` is left out and
    ``extra`` must declare every listener itself (``port`` is the one waited for).
    """

    def __init__(
        self,
        extra: list[str] | None = None,
        *,
        port: int | None = None,
        defaults: bool = True,
        persistence: bool = False,
    ) -> None:
        self.binary = require_binary("mosquitto", "mosquitto")
        self.dir = Path(tempfile.mkdtemp(prefix="phrame-mosquitto-"))
        # Kept across restart() (the log is read after a failure); removed at exit.
        atexit.register(shutil.rmtree, self.dir, True)
        self.port = port or free_port()
        self.extra = extra or []
        self.defaults = defaults
        self.persistence = persistence  # True: ``extra`` sets persistence (kept across restart)
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"mqtt://127.0.0.1:{self.port}"

    def config_text(self) -> str:
        lines = [
            *([] if self.persistence else ["persistence false"]),
            "set_tcp_nodelay true",
            f"log_dest file {self.dir / 'mosquitto.log'}",
            "log_type error",
            "log_type warning",
            "log_type notice",
        ]
        if self.defaults:
            lines += [
                "per_listener_settings false",
                f"listener {self.port} 127.0.0.1",
                "allow_anonymous true",
            ]
        lines += self.extra
        return "\n".join(lines) + "\n"

    @classmethod
    def generated(cls, folder: Path, port: int) -> Mosquitto:
        """A broker running the ``mosquitto.conf`` that ``phrame broker-config`` wrote into
        ``folder`` (its listeners, ACL, persistence and bridge), waited for on ``port``."""
        lines = (folder / "mosquitto.conf").read_text().splitlines()
        return cls(lines, port=port, defaults=False, persistence=any(x == "persistence true" for x in lines))

    def start(self) -> Mosquitto:
        conf = self.dir / "mosquitto.conf"
        conf.write_text(self.config_text())
        self.proc = subprocess.Popen(
            [self.binary, "-c", str(conf)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
        )
        if not wait_for_port(self.port):
            died = self.proc.poll() is not None
            stderr = self.proc.stderr.read().decode(errors="replace") if died and self.proc.stderr else ""
            self.stop()
            raise RuntimeError(f"mosquitto did not listen on {self.port}: {self.log()}{stderr}")
        return self

    def kill(self) -> None:
        """End the broker abruptly (SIGKILL): no clean shutdown, no wills sent on the way."""
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(5)
        self._close()

    def stop(self) -> None:
        stop_process(self.proc)
        self._close()

    def _close(self) -> None:
        if self.proc and self.proc.stderr:
            self.proc.stderr.close()
        self.proc = None

    def restart(self) -> None:
        self.stop()
        self.start()

    def log(self) -> str:
        path = self.dir / "mosquitto.log"
        return path.read_text(errors="replace") if path.exists() else ""
