"""A private dockerd for one test: its own socket, roots, containerd and bridge interface.

``tests/faults/test_2_dockerd.py`` restarts it under a running agent, which the machine's
shared daemon must never be (other sessions use it). It must never touch what the shared
daemon owns: not its socket, data or exec root, containerd, ``docker0`` or iptables rules.
Hence its own bridge interface (created here, addressed in a /24 no route uses) instead of
``--bridge none``, with which dockerd deletes ``docker0`` at start (seen to break
the first daemon), and ``--iptables=false`` (dockerd would rewrite the shared DOCKER chains).
It stops only its own pid; :meth:`PrivateDockerd.close` removes everything it made.
"""

from __future__ import annotations

import contextlib
import ipaddress
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
import uuid
from pathlib import Path

import docker

from tests.support.docker import try_docker_client
from tests.support.services import require, require_binary
from tests.support.waiting import wait_for

#: where the private bridge's /24 is picked (no Docker default pool is in 10.0.0.0/8)
POOL = ipaddress.ip_network("10.213.0.0/16")


class PrivateDockerd:
    """``start()`` it, use :attr:`host` as ``DOCKER_HOST``, :meth:`restart` it, :meth:`close`."""

    def __init__(self, root: Path | None = None, *, live_restore: bool = False) -> None:
        # short paths: the socket path has a 108-byte limit, overlay2 mount options a page
        self.root = root or Path(tempfile.mkdtemp(prefix="phrd-"))
        self.tag = uuid.uuid4().hex[:8]
        self.bridge = f"phrd{self.tag}"  # an interface name has at most 15 characters
        self.socket = self.root / "docker.sock"
        self.log = self.root / "dockerd.log"
        self.proc: subprocess.Popen[bytes] | None = None
        self.subnet: ipaddress.IPv4Network | None = None
        self.starts = 0
        # --live-restore: containers keep running while dockerd is down (no die events)
        self.live_restore = live_restore

    @property
    def host(self) -> str:
        return f"unix://{self.socket}"

    def argv(self) -> list[str]:
        config = self.root / "daemon.json"  # not the host's /etc/docker/daemon.json
        if not config.exists():
            config.write_text("{}\n")
        return [
            "dockerd",
            *("--config-file", str(config)),
            *("--host", self.host, "--pidfile", str(self.root / "dockerd.pid")),
            *("--data-root", str(self.root / "data"), "--exec-root", str(self.root / "exec")),
            # no system containerd runs here, so dockerd supervises its own under the exec
            # root; its namespace is ours too, should one ever be shared
            *("--containerd-namespace", f"phrd-{self.tag}"),
            *("--containerd-plugins-namespace", f"phrd-{self.tag}-plugins"),
            *("--bridge", self.bridge, "--iptables=false", "--ip-forward=false", "--ip-masq=false"),
            *("--userland-proxy=false", "--log-level", "info"),
            *(["--live-restore"] if self.live_restore else []),
        ]

    # -- start and stop
    def start(self, timeout: float = 60.0) -> float:
        """Start dockerd and wait until it answers a ping; the seconds it took."""
        if self.subnet is None:
            require(os.geteuid() == 0, "a private dockerd needs root")
            require_binary("dockerd", "docker.io")
            require_binary("ip", "iproute2")
            self._make_bridge()
        started = time.monotonic()
        self.socket.unlink(missing_ok=True)  # left by a SIGKILLed daemon
        with open(self.log, "ab") as out:
            out.write(f"--- start {self.starts + 1} at {time.strftime('%H:%M:%S')}\n".encode())
            out.flush()
            self.proc = subprocess.Popen(
                self.argv(), stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                start_new_session=True,
            )  # fmt: skip
        self.starts += 1
        try:
            wait_for(self._answers, f"the private dockerd on {self.host} to answer", timeout, interval=0.05)
        except AssertionError as e:
            why = f"{e}\n{self.log_tail()}"
            if self.starts == 1:  # it never ran here: skip (fail under PHRAME_REQUIRE_SERVICES=1)
                require(False, f"a private dockerd cannot start here: {why}")
            raise AssertionError(f"the private dockerd did not come back: {why}") from None
        return time.monotonic() - started

    def _answers(self) -> bool:
        if self.proc is not None and self.proc.poll() is not None:
            raise AssertionError(f"dockerd exited ({self.proc.returncode})")
        client = try_docker_client(self.host)
        if client is None:
            return False
        client.close()
        return True

    def stop(self, timeout: float = 30.0) -> None:
        """SIGTERM by pid (dockerd stops its containers, as at a host shutdown), SIGKILL
        after ``timeout``."""
        proc, self.proc = self.proc, None
        if proc is None or proc.poll() is not None:
            return
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)  # its own session: dockerd and its containerd
            proc.wait(10)

    def restart(self, timeout: float = 60.0) -> float:
        """Stop and start on the same data root; the seconds it took. Containers come back
        by their restart policies, as after any dockerd restart."""
        started = time.monotonic()
        self.stop()
        self.start(timeout)
        return time.monotonic() - started

    def client(self) -> docker.DockerClient:
        return docker.DockerClient(base_url=self.host, timeout=60)

    def close(self) -> None:
        """Remove every container (all are this test's), stop, and remove the folders and
        the bridge interface."""
        if self.proc is None and self.starts and self.live_restore:
            self.start()  # its containers outlive it: only a running daemon removes them
        if self.proc is not None and self._answers():
            with contextlib.closing(self.client()) as c:
                for container in c.containers.list(all=True):
                    with contextlib.suppress(docker.errors.APIError):
                        container.remove(force=True, v=True)
        self.stop()
        for mount in reversed(self._mounts()):  # a SIGKILLed daemon may leave its mounts
            subprocess.run(["umount", "-l", mount], capture_output=True, check=False)
        shutil.rmtree(self.root, ignore_errors=True)
        if self.subnet is not None:
            subprocess.run(["ip", "link", "delete", self.bridge], capture_output=True, check=False)

    # -- helpers
    def _make_bridge(self) -> None:
        """Our own bridge, in a /24 that no route of this host overlaps."""
        routes = json.loads(subprocess.run(["ip", "-j", "route"], capture_output=True, check=True).stdout)
        taken = [ipaddress.ip_network(r["dst"]) for r in routes if r.get("dst", "default") != "default"]
        free = [n for n in POOL.subnets(new_prefix=24) if not any(n.overlaps(t) for t in taken)]
        require(bool(free), f"no free /24 in {POOL} for a private bridge")
        self.subnet = free[int(self.tag, 16) % len(free)]
        address = f"{next(self.subnet.hosts())}/{self.subnet.prefixlen}"
        for cmd in (
            ["ip", "link", "add", "name", self.bridge, "type", "bridge"],
            ["ip", "addr", "add", address, "dev", self.bridge],
            ["ip", "link", "set", self.bridge, "up"],
        ):
            done = subprocess.run(cmd, capture_output=True, text=True, check=False)
            require(done.returncode == 0, f"cannot make a bridge for a private dockerd: {done.stderr}")

    def _mounts(self) -> list[str]:
        try:
            lines = Path("/proc/self/mountinfo").read_text().splitlines()
        except OSError:
            return []
        return [p for line in lines if (p := line.split()[4]).startswith(str(self.root) + "/")]

    def log_tail(self, lines: int = 30) -> str:
        try:
            text = self.log.read_text(errors="replace").splitlines()
        except OSError:
            return ""
        return "\n".join([f"--- private dockerd log ({self.log})", *text[-lines:]])
