"""The simulated fleet's moving parts, for ``fleet_scale.py`` and its integration test.

A real mosquitto (``$SYS`` every second), a real bare git repository whose ``post-receive``
hook is the one ``phrame dev`` installs (a push is a GitLab-shaped webhook POST), real
``phrame config-sync`` and ``phrame placement`` processes, worker processes of simulated
nodes (``fleet_sim.py``), and an observer that records every ``phrame/#`` message. Every
process it starts is stopped by its pid in :meth:`Fleet.close`; it only uses 127.0.0.1.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "benchmarks")]

from fleet_repo import write_files  # noqa: E402

from dev_stack.git_host import hook_script  # noqa: E402
from phrame.mqtt import Message, MqttClient, MqttSettings  # noqa: E402
from phrame.mqtt.broker_config import MAX_INFLIGHT_MESSAGES, MAX_QUEUED_MESSAGES  # noqa: E402
from tests.support.mosquitto import Mosquitto  # noqa: E402
from tests.support.services import free_port, stop_process, wait_for_port  # noqa: E402

GIT_ENV = {
    "GIT_AUTHOR_NAME": "Fleet Bench",
    "GIT_AUTHOR_EMAIL": "bench@phrame.invalid",
    "GIT_COMMITTER_NAME": "Fleet Bench",
    "GIT_COMMITTER_EMAIL": "bench@phrame.invalid",
}
# max_connections -1: no limit but the open-file limit, which mosquitto inherits from the
# benchmark (raised to its hard limit in fleet_scale.py: 10,000 nodes need 10,000 sockets).
# max_queued_messages and max_inflight_messages as `phrame broker-config` writes them: at
# 10,000 nodes config-sync's read back of its 20,000 desired topics passed 10,000 and the
# rest were dropped, and its push of 10,001 messages moved 20 per PUBACK round trip
BROKER_LINES = [
    "sys_interval 1",
    "max_connections -1",
    f"max_queued_messages {MAX_QUEUED_MESSAGES}",
    f"max_inflight_messages {MAX_INFLIGHT_MESSAGES}",
]


def git(*args: str, cwd: Path) -> str:
    env = {**os.environ, **GIT_ENV}
    return subprocess.run(["git", *args], cwd=cwd, env=env, capture_output=True, text=True, check=True).stdout


def wait(condition: Callable[[], object], what: str, timeout: float, interval: float = 0.02) -> float:
    """Wait (bounded) until ``condition()``; the seconds it took; raise naming ``what``."""
    start = time.monotonic()
    while not condition():
        if time.monotonic() - start > timeout:
            raise TimeoutError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(interval)
    return time.monotonic() - start


@dataclass
class Observer:
    """Every ``phrame/#`` message (and ``$SYS``), with its arrival time."""

    statuses: dict[str, dict[str, Any]] = field(default_factory=dict)
    converged_at: dict[str, float] = field(default_factory=dict)  # node -> when it converged on target
    target: str | None = None
    retained: dict[str, bytes] = field(default_factory=dict)
    sys: dict[str, str] = field(default_factory=dict)
    recording: list[tuple[float, str, bytes]] | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)

    def on_message(self, msg: Message) -> None:
        now = time.monotonic()
        if msg.topic.startswith("$SYS/"):
            self.sys[msg.topic] = (msg.payload or b"").decode(errors="replace")
            return
        with self.lock:
            if self.recording is not None and not msg.retain:
                self.recording.append((now, msg.topic, msg.payload or b""))
            self.retained[msg.topic] = msg.payload or b""
            if msg.topic.endswith("/status") and "/actual/nodes/" in msg.topic and msg.payload:
                node = msg.topic.split("/")[-2]
                doc = json.loads(msg.payload)
                self.statuses[node] = doc
                if self.target and doc.get("commit") == self.target and doc.get("converged"):
                    self.converged_at.setdefault(node, now)

    def aim(self, commit: str) -> None:
        """Count convergence on ``commit`` from now on (and nodes already there)."""
        with self.lock:
            self.target, self.converged_at = commit, {}
            for node, doc in self.statuses.items():
                if doc.get("commit") == commit and doc.get("converged"):
                    self.converged_at[node] = time.monotonic()

    def doc(self, topic: str) -> Any:
        with self.lock:
            raw = self.retained.get(topic)
        return json.loads(raw) if raw else None

    def start_recording(self) -> None:
        with self.lock:
            self.recording = []

    def stop_recording(self) -> list[tuple[float, str, bytes]]:
        with self.lock:
            got, self.recording = self.recording or [], None
        return got


class Fleet:
    """Broker, repository, config-sync, placement and simulated nodes; see the module docstring."""

    def __init__(
        self, root: Path, files: dict[str, str], nodes: list[str], *, workers: int, agents: str = "real"
    ) -> None:
        """``agents``: ``real`` (``fleet_sim.py``: the agent's own MQTT side, paho, threads) or
        ``lite`` (``fleet_lite.py``: asyncio, thousands of nodes a process)."""
        self.root, self.nodes, self.workers_n, self.agents = root, nodes, workers, agents
        # past 1,000 nodes the observer leaves heartbeats out (2,000/s at 10,000 nodes would
        # load the benchmark's own process on the cores it measures)
        self.observe_heartbeats = len(nodes) <= 1000
        self.procs: dict[str, subprocess.Popen[str]] = {}
        self.logs: dict[str, IO[str]] = {}
        self.worker_of: dict[str, str] = {}
        self.broker = Mosquitto(BROKER_LINES)
        self.bare = root / "config.git"
        self.work = root / "work"
        self.secret = root / "webhook-secret"
        self.secret.write_text(secrets.token_urlsafe(24) + "\n")
        self.listen_port = free_port()
        self.observer = Observer()
        self.client: MqttClient | None = None
        self._make_repo(files)

    # -- git
    def _make_repo(self, files: dict[str, str]) -> None:
        git("init", "--quiet", "--bare", "--initial-branch=main", str(self.bare), cwd=self.root)
        git("clone", "--quiet", str(self.bare), str(self.work), cwd=self.root)
        git("checkout", "--quiet", "-B", "main", cwd=self.work)
        write_files(self.work, files)
        git("add", "-A", cwd=self.work)
        git("commit", "--quiet", "-m", "the simulated fleet", cwd=self.work)
        git("push", "--quiet", "origin", "HEAD:refs/heads/main", cwd=self.work)
        hook = self.bare / "hooks" / "post-receive"
        hook.write_text(hook_script([f"http://127.0.0.1:{self.listen_port}/webhooks/gitlab"], self.secret))
        hook.chmod(0o755)

    def head(self) -> str:
        return git("rev-parse", "main", cwd=self.bare).strip()

    def commit_and_push(self, files: dict[str, str], message: str) -> tuple[str, float]:
        """Commit ``files`` and push (the hook POSTs the webhook); (sha, monotonic time of the push)."""
        git("pull", "--quiet", "--rebase", "origin", "main", cwd=self.work)  # placement may have committed
        write_files(self.work, files)
        git("commit", "--quiet", "-am", message, cwd=self.work)
        sha = git("rev-parse", "HEAD", cwd=self.work).strip()
        at = time.monotonic()
        git("push", "--quiet", "origin", "HEAD:refs/heads/main", cwd=self.work)
        return sha, at

    def file_at(self, sha: str, path: str) -> str:
        return git("show", f"{sha}:{path}", cwd=self.bare)

    # -- processes
    def _env(self, extra: dict[str, str]) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("PHRAME_")}
        return env | {
            "PHRAME_DESIRED_MQTT_URL": self.broker.url,
            "PHRAME_GIT_HOST": "local",
            "PHRAME_REPO_URL": str(self.bare),
            "PHRAME_TRACK_REF": "main",
            "PHRAME_LOG_FORMAT": "text",
            "PYTHONUNBUFFERED": "1",
            **extra,
        }

    def _spawn(self, name: str, argv: list[str], env: dict[str, str], **kw: Any) -> subprocess.Popen[str]:
        log = (self.root / f"{name}.log").open("w")
        self.logs[name] = log
        kw.setdefault("stdout", log)  # uvicorn's access log; workers answer on a pipe instead
        proc = subprocess.Popen(argv, env=env, stderr=log, text=True, **kw)
        self.procs[name] = proc
        return proc

    def log_text(self, name: str) -> str:
        path = self.root / f"{name}.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def start_broker(self) -> None:
        self.broker.start()
        self.client = MqttClient(MqttSettings(url=self.broker.url), "fleet-observer")
        self.client.start(timeout=10)
        if self.observe_heartbeats:
            self.client.subscribe("phrame/#", self.observer.on_message)
        else:
            for plane in ("desired/#", "actual/nodes/+/status", "actual/nodes/+/containers/+"):
                self.client.subscribe(f"phrame/{plane}", self.observer.on_message)
        self.client.subscribe("$SYS/broker/#", self.observer.on_message)

    def start_config_sync(self, timeout: float = 120) -> float:
        state = self.root / "config-sync-state"
        env = self._env({
            "PHRAME_STATE_DIR": str(state),
            "PHRAME_LISTEN": f"127.0.0.1:{self.listen_port}",
            "PHRAME_WEBHOOK_SECRET_FILE": str(self.secret),
        })  # fmt: skip
        start = time.monotonic()
        self._spawn("config-sync", [sys.executable, "-m", "phrame", "config-sync"], env)
        if not wait_for_port(self.listen_port, timeout=30):
            raise RuntimeError(f"config-sync did not listen: {self.log_text('config-sync')[-2000:]}")
        head = self.head()
        wait(lambda: (self.observer.doc("phrame/desired/environments/prod/sync") or {}).get("commit") == head,
             "config-sync's first sync", timeout)  # fmt: skip
        return time.monotonic() - start

    def start_placement(self, extra: dict[str, str]) -> subprocess.Popen[str]:
        env = self._env({"PHRAME_STATE_DIR": str(self.root / "placement-state"), **extra})
        return self._spawn("placement", [sys.executable, "-m", "phrame", "placement"], env)

    def start_mirror(self, plane: str = "actual") -> subprocess.Popen[str]:
        """``phrame mirror --plane PLANE`` with its default settings (snapshots in the run's folder)."""
        env = self._env({"PHRAME_STATE_DIR": str(self.root / f"mirror-{plane}-state")})
        argv = [sys.executable, "-m", "phrame", "mirror", "--plane", plane]
        return self._spawn(f"mirror-{plane}", argv, env)

    def start_nodes(self, timeout: float = 180) -> float:
        """Start the worker processes; the seconds until every agent is connected."""
        start = time.monotonic()
        shares = [self.nodes[i :: self.workers_n] for i in range(self.workers_n)]
        for i, share in enumerate(s for s in shares if s):
            name = f"nodes-{i}"
            script = "fleet_lite.py" if self.agents == "lite" else "fleet_sim.py"
            argv = [sys.executable, str(ROOT / "benchmarks" / script), "--broker", self.broker.url]
            argv += ["--state", str(self.root / "agents")] if self.agents != "lite" else []
            argv += share
            self._spawn(name, argv, os.environ.copy(), stdin=subprocess.PIPE, stdout=subprocess.PIPE)
            self.worker_of |= {n: name for n in share}
        for name in sorted({*self.worker_of.values()}):
            line = self._read_line(name, timeout)
            if not line.startswith("connected"):
                raise RuntimeError(f"{name}: {line}; log: {self.log_text(name)[-2000:]}")
        return time.monotonic() - start

    def _read_line(self, name: str, timeout: float) -> str:
        proc = self.procs[name]
        assert proc.stdout is not None
        got: list[str] = []
        reader = threading.Thread(target=lambda: got.append(proc.stdout.readline().strip()), daemon=True)  # type: ignore[union-attr]
        reader.start()
        reader.join(timeout)
        return got[0] if got else f"no answer within {timeout:.0f} s"

    def kill_worker(self, name: str) -> list[str]:
        """SIGKILL one worker process (by its pid): its nodes vanish without a word, so the
        broker publishes each one's last will. Returns those nodes."""
        proc = self.procs[name]
        proc.kill()
        proc.wait(10)
        return [n for n, w in self.worker_of.items() if w == name]

    def stop_node(self, node: str) -> None:
        name = self.worker_of[node]
        proc = self.procs[name]
        assert proc.stdin is not None
        proc.stdin.write(f"stop {node}\n")
        proc.stdin.flush()
        line = self._read_line(name, 30)
        if line != f"stopped {node}":
            raise RuntimeError(f"{name} did not stop {node}: {line}")

    def pid(self, name: str) -> int:
        return self.procs[name].pid

    def post_webhook_ok(self) -> bool:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.listen_port}/healthz", timeout=5) as r:
            return bool(r.status == 200)

    def close(self) -> None:
        """Stop everything started, by pid: the nodes first (their offline statuses), then the services."""
        for name, proc in self.procs.items():
            if name.startswith("nodes-") and proc.stdin is not None:  # a killed one's pipe too
                with contextlib.suppress(OSError):  # already gone
                    proc.stdin.close()
        for name, proc in self.procs.items():
            if name.startswith("nodes-"):
                try:
                    proc.wait(30)
                except subprocess.TimeoutExpired:
                    stop_process(proc)  # type: ignore[arg-type]
        for proc in self.procs.values():
            stop_process(proc)  # type: ignore[arg-type]
            if proc.stdout is not None:
                proc.stdout.close()
        for log in self.logs.values():
            log.close()
        if self.client is not None:
            self.client.stop()
        self.broker.stop()
        shutil.rmtree(self.root / "agents", ignore_errors=True)
