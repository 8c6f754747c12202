"""The dev stack is authenticated like production and its state is its owner's alone; the
commands a person runs beside it (``phrame status``, ``promote``, ``replay``) find it from its
state folder, on whatever ports it runs.

One ``phrame dev`` (real mosquitto, config-sync, placement, two agents; no Docker needed)
in ``<tmp>/.phrame-dev`` on free ports, so nothing here could reach a stack on the defaults.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from phrame.mqtt import MqttClient, MqttError, MqttSettings, PublishRefused
from tests.support import waiting
from tests.support.mqtt import Inbox
from tests.support.services import free_port, require_binary

pytestmark = [pytest.mark.mqtt, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]


class Stack:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.state = root / ".phrame-dev"
        self.prefix = f"sec{os.getpid()}"
        self.nodes = [f"{self.prefix}-1", f"{self.prefix}-2"]
        self.broker_port, self.sync_port = free_port(), free_port()
        self.output = root / "dev.out"

    @property
    def broker_url(self) -> str:
        return f"mqtt://127.0.0.1:{self.broker_port}"

    def login(self, account: str) -> MqttSettings:
        """Settings for ``account`` with the password the stack wrote for it."""
        return MqttSettings(
            url=self.broker_url,
            username=account,
            password=(self.state / "credentials" / account).read_text().strip(),
        )


def clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PHRAME_")}
    return env | {"PYTHONPATH": str(ROOT)} | extra


def phrame(stack: Stack, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    """A phrame command as a person runs it beside the stack: in the folder holding
    ``.phrame-dev``, with no PHRAME_* settings."""
    return subprocess.run(
        [sys.executable, "-m", "phrame", *args],
        cwd=stack.root,
        env=clean_env(**env),
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    require_binary("mosquitto", "mosquitto")
    s = Stack(tmp_path_factory.mktemp("devsec"))
    argv = [
        *(sys.executable, "-m", "phrame", "dev", "--state-dir", str(s.state)),
        *("--node-prefix", s.prefix, "--broker-port", str(s.broker_port)),
        *("--listen", f"127.0.0.1:{s.sync_port}", "--web-port", str(free_port())),
        *("--api-port", str(free_port())),
    ]
    env = clean_env(DOCKER_HOST=f"unix://{s.root}/none.sock", PHRAME_HEARTBEAT_S="0.5")
    with open(s.output, "wb") as sink:
        proc = subprocess.Popen(argv, stdout=sink, stderr=subprocess.STDOUT, env=env, cwd=s.root)
    try:
        waiting.wait_for(
            lambda: "ready in" in s.output.read_text() or proc.poll() is not None,
            "the ready banner",
            90,
            interval=0.1,
            observe=s.output.read_text,
        )
        assert proc.poll() is None, s.output.read_text()
        yield s
    finally:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)
        subprocess.run(
            [*argv[:6], "--down", "--purge"], capture_output=True, timeout=120, env=env, cwd=s.root
        )


# -- the broker


def test_an_anonymous_client_is_refused(stack: Stack) -> None:
    client = MqttClient(MqttSettings(url=stack.broker_url), "anonymous-local-user")
    try:
        with pytest.raises(MqttError):
            client.start(timeout=5)
    finally:
        client.stop()


def test_a_node_account_cannot_write_another_nodes_desired_topic(stack: Stack) -> None:
    """A local user with one node's password cannot start a process on another node."""
    one, other = stack.nodes
    watcher = MqttClient(stack.login("operator"), "operator")
    node = MqttClient(stack.login(f"node-{one}"), f"node-{one}")
    try:
        inbox = Inbox()
        watcher.start(timeout=5)
        watcher.subscribe(f"phrame/desired/nodes/{other}/#", inbox)
        node.start(timeout=5)
        topic = f"phrame/desired/nodes/{other}/processes/x.pwn.0"
        with pytest.raises(PublishRefused):
            node.publish_batch([(topic, b'{"command": ["sh", "-c", "id > /tmp/pwned"]}')], timeout=5)
        with inbox.cond:
            assert not inbox.cond.wait_for(lambda: topic in inbox.topics, 0.5)
        # not even its own node's desired plane: that is config-sync's alone
        with pytest.raises(PublishRefused):
            node.publish_batch([(f"phrame/desired/nodes/{one}/manifest", b"{}")], timeout=5)
    finally:
        node.stop()
        watcher.stop()


# -- the state folder


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_the_state_folder_logs_repo_and_credentials_are_private(stack: Stack) -> None:
    assert mode(stack.state) == 0o700
    logs = list((stack.state / "logs").glob("*.log"))
    assert logs and {p.name: oct(mode(p)) for p in logs} == {p.name: "0o600" for p in logs}
    credentials = stack.state / "credentials"
    assert mode(credentials) == 0o700
    accounts = {p.name for p in credentials.iterdir()}
    assert {
        "config-sync",
        "placement",
        "observer",
        "operator",
        *(f"node-{n}" for n in stack.nodes),
    } <= accounts
    assert all(mode(p) == 0o600 for p in credentials.iterdir())
    for secret in ("webhook-secret", "api-token", "broker/passwd", "broker/acl", "broker/mosquitto.conf"):
        assert mode(stack.state / secret) == 0o600, secret
    # the repository holds the environments' values: nothing in it readable by others
    opened = [p for p in (stack.state / "config.git").rglob("*") if p.stat().st_mode & 0o077]
    assert not opened, opened[:5]


# -- commands that find the stack


def test_phrame_status_reads_the_dev_stack_on_its_own_ports(stack: Stack) -> None:
    done = phrame(stack, "status", "--json", "--timeout", "5")
    assert done.returncode in (0, 1), done.stderr
    nodes = {n["node"] if isinstance(n, dict) else n for n in json.loads(done.stdout)["nodes"]}
    assert set(stack.nodes) <= nodes, done.stdout
    # an explicit setting still wins
    elsewhere = phrame(
        stack, "status", "--timeout", "1", PHRAME_DESIRED_MQTT_URL=f"mqtt://127.0.0.1:{free_port()}"
    )
    assert elsewhere.returncode == 2 and "cannot read the broker" in elsewhere.stderr


def test_make_status_takes_the_state_folder_from_dev_args(stack: Stack) -> None:
    done = subprocess.run(
        [
            "make",
            "--no-print-directory",
            "-o",
            "deps",
            "-C",
            str(ROOT),
            "status",
            f"DEV_ARGS=--state-dir {stack.state}",
        ],
        env=clean_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert all(n in done.stdout for n in stack.nodes), done.stdout + done.stderr


def test_phrame_promote_reaches_the_dev_stacks_config_sync_with_its_secret(stack: Stack) -> None:
    done = phrame(stack, "promote", "quickstart", "worker")
    # config-sync's own answer (nothing waits for a promotion), not a refused connection or a 401
    assert done.returncode == 1 and "nothing to promote" in done.stdout and "401" not in done.stdout, (
        done.stdout + done.stderr
    )


def test_phrame_replay_reaches_the_dev_stacks_config_sync_with_its_secret(stack: Stack) -> None:
    done = phrame(stack, "replay", str(ROOT / "fixtures/webhooks/push.json"), "--new-key")
    assert done.returncode in (0, 1) and not done.stdout.startswith(("401", "403")), done.stdout + done.stderr
    assert done.stdout[:3].isdigit(), done.stdout + done.stderr


def test_validate_reads_the_node_policies_from_the_dev_stacks_broker(stack: Stack, tmp_path: Path) -> None:
    """``phrame validate --policy-from-broker`` beside a dev stack logs in as ``phrame status``
    does (the stack's read-only account), and the stack's own policy lets its sample run."""
    clone = tmp_path / "phrame-config"
    subprocess.run(["git", "clone", "-q", str(stack.state / "config.git"), str(clone)], check=True)
    waiting.wait_for(
        lambda: phrame(stack, "status", "--json").returncode in (0, 1), "the nodes to report", 30
    )
    done = phrame(stack, "validate", str(clone), "--policy-from-broker")
    assert "cannot read" not in done.stderr and "Not authorized" not in done.stderr, done.stderr
    assert done.returncode == 0, done.stdout + done.stderr
