"""The production compose stack, built and run for real: a pushed commit reaches a container.

``scripts/build-image`` builds the project image (mmdebstrap base, host-built wheels);
``docker-compose`` starts ``compose/docker-compose.yml`` with a test override: the broker
config exactly as ``phrame broker-config`` writes it (TLS listeners, throw-away
certificates), a local bare repository, ``--profile agent``. A push plus a GitLab-shaped webhook must end with the agent's
container running the busybox service with the commit's labels and the node's status on
the broker saying converged at that commit. docs/operations/compose-stack.md lists
what this proves and what it does not.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import docker
import pytest

from phrame.cli import main as phrame_main
from phrame.mqtt import MqttClient, MqttSettings
from schemas import Topics
from tests.support.agent_container import host_socket
from tests.support.compose_stack import ROOT, ComposeStack
from tests.support.services import require, require_binary, wait_until
from tests.support.waiting import wait_for

UNIT = ROOT / "compose" / "systemd" / "phrame-node-agent.service"
SERVICES = (
    "mosquitto",
    "config-sync",
    "placement",
    "node-agent",
    "mirror-desired",
    "mirror-actual",
    "topic-api",
)
BUILD_TIMEOUT_S = 900  # mmdebstrap on a fresh machine is about a minute; the rest is cached
T = Topics()


def build_images() -> None:
    """scripts/build-image, its lines echoed as they come (pytest shows them on failure)."""
    lines: list[str] = []
    with subprocess.Popen(
        [str(ROOT / "scripts" / "build-image")],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "PYTHON": sys.executable},
    ) as proc:
        assert proc.stdout is not None
        deadline = time.monotonic() + BUILD_TIMEOUT_S
        for line in proc.stdout:
            lines.append(line)
            print(line, end="")
            if time.monotonic() > deadline:
                proc.kill()
                lines.append(f"killed after {BUILD_TIMEOUT_S} s\n")
                break
        rc = proc.wait(timeout=60)
    assert rc == 0, f"scripts/build-image exited {rc}:\n{''.join(lines[-40:])}"


@pytest.fixture
def stack(
    docker_client: docker.DockerClient, busybox_image: str, test_label: str, tmp_path: Path
) -> Iterator[ComposeStack]:
    compose = require_binary("docker-compose", "docker-compose")
    require_binary("mmdebstrap", "mmdebstrap")
    require_binary("mosquitto_passwd", "mosquitto")
    require_binary("openssl", "openssl")
    require(host_socket() == "/var/run/docker.sock", "the compose file mounts /var/run/docker.sock")
    require(os.geteuid() == 0, "needs root: the test gives its bare repo to the image's uid 10001")
    build_images()
    running = ComposeStack(tmp_path, docker_client, label=test_label, compose=compose)
    running.write_files(phrame=str(Path(sys.executable).parent / "phrame"))
    try:
        yield running
    finally:
        print("removed after docker-compose down:", running.down())
    assert running.leftovers() == [], "the stack left objects behind"


def node_status(stack: ComposeStack, url: str) -> dict[str, Any]:
    """The node's retained status, read through a published 127.0.0.1 TLS port.

    As ``observer``, not as the node's user: the broker makes the user name the client id,
    so a second login as ``node-<node>`` would take the running agent's place."""
    user = "observer"
    settings = MqttSettings(url=url, username=user, password=stack.password(user), tls_ca=str(stack.ca))
    client = MqttClient(settings, f"compose-test-{stack.node}")
    client.start(timeout=10)
    try:
        retained = client.collect_retained(T.status(stack.node), timeout=5)
    finally:
        client.stop()
    payload = retained.get(T.status(stack.node))
    return json.loads(payload) if payload else {}


def wait_converged(stack: ComposeStack, commit: str, timeout: float, *, url: str) -> None:
    seen: list[dict[str, Any]] = []

    def converged() -> bool:
        seen.append(node_status(stack, url))
        return bool(seen[-1].get("converged")) and seen[-1].get("commit") == commit

    try:
        wait_until(converged, f"node {stack.node} converged at {commit[:12]}", timeout=timeout)
    except AssertionError as e:
        raise AssertionError(f"{e}; last status {seen[-1:]}\n{stack.logs()}") from None


def replay_push(stack: ComposeStack, tmp_path: Path, commit: str, token: str) -> int:
    """POST a GitLab Push Hook (the recorded fixture, pointed at ``commit``) to config-sync."""
    event = json.loads((ROOT / "fixtures" / "webhooks" / "push.json").read_text())
    event["body"].update(after=commit, checkout_sha=commit)
    path = tmp_path / "push.json"
    path.write_text(json.dumps(event))
    url = f"http://127.0.0.1:{stack.sync_port}/webhooks/gitlab"
    return phrame_main(["replay", str(path), "--url", url, "--token", token, "--new-key"])


@pytest.mark.slow
def test_a_push_is_converged_by_the_agent_container(stack: ComposeStack, tmp_path: Path) -> None:
    stack.compose("up", "-d")
    try:
        wait_until(lambda: all(stack.health(s) == "healthy" for s in SERVICES), "healthy services", 120)
    except AssertionError as e:
        states = {s: stack.health(s) for s in SERVICES}
        raise AssertionError(f"{e}: {states}\n{stack.logs()}") from None

    for service in ("config-sync", "placement", "node-agent", "topic-api"):  # each logged in with its secret
        log = stack.container(service).logs().decode()
        assert "connected to mqtts://mosquitto:8883" in log, f"{service} never logged in:\n{log}"
    # the agent found its own compose container (it would refuse to touch it)
    agent = stack.container("node-agent")
    wait_until(lambda: f"running in container {agent.id[:12]}" in agent.logs().decode(), "own container", 10)
    first = stack.work.head.commit.hexsha
    mqtts, wss = f"mqtts://127.0.0.1:{stack.mqtts_port}", f"wss://127.0.0.1:{stack.wss_port}"
    wait_converged(stack, first, timeout=60, url=mqtts)  # the empty manifest of the first sync

    probe = f"name: probe\nimage: phrame-test/busybox:latest\ncommand: [sleep, '3600']\nplacement:\n  node: {stack.node}\n"
    commit = stack.commit("deploy probe", {f"environments/{stack.env}/services/probe.yaml": probe})
    started = time.monotonic()
    assert replay_push(stack, tmp_path, commit, token="wrong-secret") == 1  # the secret file is enforced
    assert replay_push(stack, tmp_path, commit, token=stack.secret) == 0
    name = f"{stack.env}.probe.0"

    def probe_running() -> bool:
        found = stack.client.containers.list(filters={"name": f"^/{name}$"})
        return bool(found) and found[0].status == "running"

    wait_until(probe_running, f"container {name} running", timeout=60)
    labels = stack.client.containers.get(name).labels
    assert labels["io.phrame.node"] == stack.node
    assert labels["io.phrame.commit"] == commit
    assert labels["io.phrame.managed"] == "true"
    wait_converged(stack, commit, timeout=30, url=mqtts)
    assert node_status(stack, wss)["commit"] == commit  # the WebSocket listener serves the same
    print(f"push -> converged in {time.monotonic() - started:.1f} s")
    # the agent's own container is untouched and still healthy after the pass
    assert stack.health("node-agent") == "healthy"
    check_topic_api(stack, commit)


def check_topic_api(stack: ComposeStack, commit: str) -> None:
    """The mirrors' snapshots reach the topic API; its kv writes pass the broker's ACL."""
    api = f"http://127.0.0.1:{stack.api_port}"

    def node_view() -> Any:
        with urllib.request.urlopen(f"{api}/api/nodes/{stack.node}", timeout=5) as r:
            view = json.loads(r.read())
        return view if view["converged"] and view["commit"]["applied"] == commit else None

    try:
        view = wait_for(node_view, "the topic API showing the node converged", 30, interval=0.5)
    except AssertionError as e:
        raise AssertionError(f"{e}\n{stack.logs()}") from None
    assert [i["status"] for i in view["items"]] == ["in-sync"]
    put = urllib.request.Request(
        f"{api}/api/kv/phrame/kv/compose-test",
        data=b'{"ok": true}',
        method="PUT",
        headers={"Authorization": f"Bearer {stack.api_token}"},
    )
    with urllib.request.urlopen(put, timeout=10) as r:
        assert r.status == 200
    with urllib.request.urlopen(f"{api}/api/kv/phrame/kv/compose-test", timeout=5) as r:
        assert json.loads(r.read())["payload"] == {"ok": True}


def test_the_agent_systemd_unit_verifies(tmp_path: Path) -> None:
    """``systemd-analyze verify`` accepts the unit; only ExecStart points at a stand-in binary.

    Static only: no systemd runs as PID 1 here, so the unit is never started (docs/operations/compose-stack.md).
    """
    analyze = require_binary("systemd-analyze", "systemd")
    stand_in = tmp_path / "phrame"
    stand_in.write_text("#!/bin/sh\n")
    stand_in.chmod(0o755)
    text = UNIT.read_text()
    assert "ExecStart=/opt/phrame/bin/phrame node-agent" in text
    for line in ("KillMode=process", "Restart=always", "EnvironmentFile=/etc/phrame/node-agent.env"):
        assert line in text.splitlines(), line
    unit = tmp_path / UNIT.name
    unit.write_text(text.replace("/opt/phrame/bin/phrame", str(stand_in)))
    done = subprocess.run([analyze, "verify", str(unit)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and "phrame-node-agent" not in done.stderr, done.stderr
