"""``phrame dev`` as a subprocess for the end-to-end tests and the push→converged benchmark.

One stack on free 127.0.0.1 ports, its own state folder, node names and environment name
unique to the run (nothing collides with anyone's dev stack on the shared daemon), a clone
of its config repo to push from, and readers for what the stack reports (config-sync's
``/status``, node statuses and placement state over MQTT). :meth:`DevStackProcess.close`
stops it and runs ``phrame dev --down --purge``, which removes every container and network
of its nodes.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.request
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from dev_stack.credentials import PERSON_ACCOUNT, mosquitto_hash
from phrame.mqtt import Message, MqttClient, MqttError, MqttSettings
from phrame.mqtt.broker_config import node_account, node_acl
from tests.support.agent_support import open_policy_file
from tests.support.services import free_port
from tests.support.waiting import wait_for
from tests.support.web import page_text

# Short grace periods so a node loss is decided in seconds (placement's defaults are 20 s + 60 s).
FAST = {
    "PHRAME_HEARTBEAT_S": "1",
    "PHRAME_NODE_TIMEOUT_S": "3",
    "PHRAME_RESCHEDULE_AFTER_S": "2",
    "PHRAME_PLACEMENT_INTERVAL_S": "0.5",
    "PHRAME_STOP_TIMEOUT_S": "2",
    "PHRAME_RESYNC_S": "5",
    # no poll within a test: every deploy must come from the post-receive hook, placement's too
    "PHRAME_POLL_S": "600",
}


class DevStackProcess:
    def __init__(self, root: Path, *, nodes: int = 2, env: dict[str, str] | None = None) -> None:
        run = uuid.uuid4().hex[:6]
        self.root = root
        self.state = root / "state"
        self.prefix = f"e2e{run}"
        self.nodes = [f"{self.prefix}-{i}" for i in range(1, nodes + 1)]
        self.environment = f"e2e{run}"
        self.broker_port, self.sync_port, self.web_port = free_port(), free_port(), free_port()
        self.api_port = free_port()
        self.output = root / "dev.out"
        self.statuses: dict[str, dict[str, Any]] = {}
        self.placement: dict[str, Any] = {}
        self._lock = threading.Lock()
        # set by each status or placement message: a wait on them looks again at once
        self._news = threading.Event()
        self.mqtt: MqttClient | None = None
        self.child_env = {k: v for k, v in os.environ.items() if not k.startswith("PHRAME_")}
        # the sample runs a host process, as root where the tests run as root: a node policy allowing it
        self.child_env |= FAST | {"PHRAME_POLICY_FILE": open_policy_file(root)} | (env or {})
        self.node_count = nodes
        self._out = open(self.output, "ab")  # noqa: SIM115 -- closed in close()
        self.start()
        self.clone = root / "clone"

    def start(self) -> None:
        self.started = time.monotonic()
        self.console_from = len(self.console()) if self.output.exists() else 0
        self.proc = subprocess.Popen(
            [
                *self.phrame_dev(),
                *("--nodes", str(self.node_count), "--node-prefix", self.prefix),
                *("--environment", self.environment),
                *("--broker", "mosquitto", "--broker-port", str(self.broker_port)),
                *("--listen", f"127.0.0.1:{self.sync_port}", "--web-port", str(self.web_port)),
                *("--api-port", str(self.api_port)),
            ],
            env=self.child_env,
            stdout=self._out,
            stderr=subprocess.STDOUT,
        )

    def stop(self) -> None:
        """Ctrl-C's path: SIGTERM to ``phrame dev``, which stops its children in order."""
        if self.mqtt is not None:
            self.mqtt.stop()
            self.mqtt = None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)

    def phrame_dev(self) -> list[str]:
        return [sys.executable, "-m", "phrame", "dev", "--state-dir", str(self.state)]

    # -- start and stop
    def wait_ready(self, timeout: float = 120.0) -> float:
        """Seconds from start to the ready banner."""
        self.wait(lambda: "ready in" in self.console()[self.console_from :], "the ready banner", timeout)
        ready_after = time.monotonic() - self.started
        if not self.clone.exists():
            self.git("clone", "--quiet", str(self.state / "config.git"), str(self.clone), cwd=self.root)
        # as a person watches it: the read-only account (the broker refuses anonymous clients)
        self.mqtt = MqttClient(self.login(PERSON_ACCOUNT), f"e2e-watch-{uuid.uuid4().hex[:6]}")
        self.mqtt.start()
        self.mqtt.subscribe("phrame/actual/nodes/+/status", self._on_status)
        self.mqtt.subscribe(f"phrame/desired/environments/{self.environment}/placement", self._on_placement)
        return ready_after

    # -- the broker's accounts (a new password for each at every start of the stack)
    def password_file(self, account: str) -> Path:
        return self.state / "credentials" / account

    def login_env(self, account: str) -> dict[str, str]:
        """The settings a ``phrame`` command needs to log in to the stack's broker as ``account``."""
        return {
            "PHRAME_DESIRED_MQTT_URL": f"mqtt://127.0.0.1:{self.broker_port}",
            "PHRAME_MQTT_USERNAME": account,
            "PHRAME_MQTT_PASSWORD_FILE": str(self.password_file(account)),
        }

    def login(self, account: str) -> MqttSettings:
        return MqttSettings.from_env("desired", self.login_env(account))

    def add_node_account(self, node: str) -> None:
        """An account for a node that joins after the start (a password, its ACL block), which
        the running broker reads on SIGHUP, as mosquitto reloads its password file and ACL."""
        password = uuid.uuid4().hex
        path = self.password_file(node_account(node))
        path.write_text(password + "\n")
        path.chmod(0o600)
        broker = self.state / "broker"
        with open(broker / "passwd", "a") as f:
            f.write(f"{node_account(node)}:{mosquitto_hash(password)}\n")
        with open(broker / "acl", "a") as f:
            f.write("\n" + "\n".join(node_acl(node, "phrame")) + "\n")
        os.kill(self.pid_of("broker"), signal.SIGHUP)
        login = self.login(node_account(node))
        wait_for(lambda: _logs_in(login), f"the broker to let {node_account(node)} in", 10)

    def close(self) -> str:
        """Stop the stack and remove what it created; the output of ``--down --purge``."""
        self.stop()
        self._out.close()
        down = subprocess.run(
            [*self.phrame_dev(), "--down", "--purge"], capture_output=True, text=True, timeout=120
        )
        return down.stdout + down.stderr

    # -- the topic API (dashboard at ``api_url``, the API under ``api_url + "api/"``)
    @property
    def api_url(self) -> str:
        return f"http://127.0.0.1:{self.api_port}/"

    def api_token(self) -> str:
        return (self.state / "api-token").read_text().strip()

    def api(self, path: str) -> Any:
        """GET ``path`` (e.g. ``api/nodes``) of the stack's topic API, as JSON."""
        with urllib.request.urlopen(self.api_url + path.lstrip("/"), timeout=5) as r:
            return json.loads(r.read())

    # -- reading
    def console(self) -> str:
        return self.output.read_text(errors="replace")

    def log_tails(self, lines: int = 25) -> str:
        out = [f"--- phrame dev console (last {lines * 2} lines)", *self.console().splitlines()[-lines * 2 :]]
        for log in sorted((self.state / "logs").glob("*.log")):
            text = [line for line in log.read_text(errors="replace").splitlines() if '"GET /' not in line]
            out += [f"--- {log.name}", *text[-lines:]]
        return "\n".join(out)

    def wait(
        self,
        condition: Callable[[], object],
        what: str,
        timeout: float = 60.0,
        *,
        observe: Callable[[], object] | None = None,
    ) -> float:
        """Poll until ``condition``; the seconds it took. Fails with the stack's log tails
        (and what ``observe`` returned last: what was seen instead)."""
        start = time.monotonic()

        def done() -> bool:
            if self.proc.poll() is not None:  # no use waiting for a stack that is gone
                raise AssertionError(
                    f"phrame dev exited ({self.proc.returncode}) waiting for {what}\n{self.log_tails()}"
                )
            return bool(condition())

        try:
            wait_for(done, what, timeout, interval=0.05, observe=observe, pause=self._pause)
        except AssertionError as e:
            if self.proc.poll() is not None:
                raise
            raise AssertionError(f"{e}\n{self.log_tails()}") from None
        return time.monotonic() - start

    def _pause(self, seconds: float) -> None:
        """Until the next status or placement message, at most ``seconds`` (a wait on
        anything else, the console or the page, looks again after ``seconds``)."""
        self._news.wait(seconds)
        self._news.clear()  # what it announced is stored already: the next look sees it

    def _on_status(self, msg: Message) -> None:
        node = msg.topic.split("/")[-2]
        with self._lock:
            self.statuses[node] = json.loads(msg.payload) if msg.payload else {}
        self._news.set()

    def _on_placement(self, msg: Message) -> None:
        with self._lock:
            self.placement = json.loads(msg.payload) if msg.payload else {}
        self._news.set()

    def node_status(self, node: str) -> dict[str, Any]:
        with self._lock:
            return dict(self.statuses.get(node) or {})

    def is_converged(self, node: str, commit: str | None = None) -> bool:
        s = self.node_status(node)
        return s.get("state") == "online" and bool(s.get("converged")) and commit in (None, s.get("commit"))

    def settled(self) -> bool:
        """The head of main deployed, every node converged, and placement done with it: its last
        pass read the head and moved nothing (a sample just up is "converged" on its first
        commit while placement is still to commit the label-placed replicas' nodes)."""
        head = self.remote_head()
        with self._lock:
            placement = dict(self.placement)
        return (
            placement.get("base") == head
            and not placement.get("moves")
            and not placement.get("pending")
            and self.commit_status(head) == "success"
            and all(self.is_converged(n) for n in self.nodes)
        )

    def wait_settled(self, timeout: float = 120.0) -> float:
        return self.wait(self.settled, "the head of main deployed, converged and placed", timeout)

    def sync_status(self) -> dict[str, Any]:
        token = (self.state / "webhook-secret").read_text().strip()  # the full view needs it
        request = urllib.request.Request(
            f"http://127.0.0.1:{self.sync_port}/status", headers={"Authorization": f"Bearer {token}"}
        )
        with urllib.request.urlopen(request, timeout=5) as r:
            doc: dict[str, Any] = json.loads(r.read())
        return doc

    def commit_status(self, sha: str, name: str = "phrame/deploy") -> str | None:
        for s in self.sync_status()["reports"]["statuses"]:
            if s["sha"] == sha and s["name"] == name:
                return str(s["state"])
        return None

    def page(self) -> str:
        return page_text(f"http://127.0.0.1:{self.web_port}/")

    # -- pushing
    def git(self, *args: str, cwd: Path | None = None) -> str:
        ident = ["-c", "user.name=E2E", "-c", "user.email=e2e@example.test"]
        done = subprocess.run(
            ["git", *ident, *args], cwd=cwd or self.clone, capture_output=True, text=True, check=True
        )
        return done.stdout + done.stderr

    def env_file(self, rel: str) -> Path:
        return self.clone / "environments" / self.environment / rel

    def commit_and_push(self, message: str) -> tuple[str, float]:
        """Commit everything, pull placement's commits first, push; (sha, time of the push)."""
        self.git("add", "--all")
        if self.git("status", "--porcelain").strip():  # else already committed (a revert)
            self.git("commit", "--quiet", "-m", message)
        at = self.push()  # may rebase: the sha is read after it
        return self.head(), at

    def push(self, attempts: int = 5) -> float:
        """Rebase on placement's commits and push; the time of the accepted push."""
        for attempt in range(attempts):
            self.git("pull", "--quiet", "--rebase", "origin", "main")
            at = time.monotonic()
            try:
                self.git("push", "--quiet", "origin", "HEAD:main")
                return at
            except subprocess.CalledProcessError:  # placement pushed in between: as a person would, again
                if attempt == attempts - 1:
                    raise
        raise AssertionError("unreachable")

    def head(self, ref: str = "HEAD") -> str:
        return self.git("rev-parse", ref).strip()

    def remote_head(self) -> str:
        return self.git("--git-dir", str(self.state / "config.git"), "rev-parse", "main").strip()

    def pid_of(self, child: str) -> int:
        return int((self.state / "run" / f"{child}.pid").read_text())

    def hold(self, child: str, held: bool = True) -> None:
        path = self.state / "run" / f"{child}.hold"
        if held:
            path.touch()
        else:
            path.unlink(missing_ok=True)


def _logs_in(login: MqttSettings) -> bool:
    client = MqttClient(login, "login-check")
    try:
        client.start(timeout=2)
    except MqttError:
        return False
    finally:
        client.stop()
    return True
