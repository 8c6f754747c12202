"""A protected environment through ``phrame dev``: real mosquitto, config-sync, agents on the one
Docker daemon and git pushes through the local git host. The commit that adds ``protected:`` is
judged by the environment as deployed before (unprotected) and deploys; the next push is
held (no container of it appears, the ``sync`` topic and ``phrame/deploy`` say why) until
``phrame approve`` (the real CLI), then it runs, and its deploy record names the approver."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import docker
import pytest

from tests.support.dev_stack import DevStackProcess
from tests.support.services import require_binary

pytestmark = [pytest.mark.docker, pytest.mark.mqtt, pytest.mark.slow]
SERVICE = "gated"
LOOP = "trap 'exit 0' TERM; while true; do sleep 3600 & wait; done"


@pytest.fixture(scope="module")
def stack(client: docker.DockerClient, tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevStackProcess]:
    require_binary("mosquitto", "mosquitto")
    s = DevStackProcess(tmp_path_factory.mktemp("approvals"))
    try:
        s.wait_ready()
        s.wait_settled(120)
        yield s
    finally:
        down = s.close()  # stops the stack and removes what it made (--down --purge)
        left = _running(client, s)
        assert not left, f"phrame dev --down --purge left {left}:\n{down}"


def _sync(stack: DevStackProcess) -> dict[str, Any]:
    env = stack.sync_status().get("environments", {}).get(stack.environment) or {}
    return dict(env.get("sync") or {})


def _running(client: docker.DockerClient, stack: DevStackProcess) -> list[str]:
    found = client.containers.list(filters={"label": f"io.phrame.service={SERVICE}"}, ignore_removed=True)
    return [c.name for c in found if c.labels.get("io.phrame.node") in stack.nodes]


def test_a_push_waits_for_phrame_approve(client: docker.DockerClient, stack: DevStackProcess) -> None:
    environment = stack.env_file("environment.yaml")
    environment.write_text(environment.read_text() + "protected:\n  approvals: 1\n")
    protect, _ = stack.commit_and_push("approvals: protect the environment")
    # judged by the environment as last deployed (unprotected): it deploys
    stack.wait(
        lambda: (_sync(stack).get("last_applied") or {}).get("commit") == protect, "protected: to deploy", 60
    )
    stack.env_file(f"services/{SERVICE}.yaml").write_text(
        f'name: {SERVICE}\nimage: phrame-quickstart/busybox:1\ncommand: [sh, -c, "{LOOP}"]\n'
        f"placement:\n  node: {stack.nodes[0]}\n"
    )
    sha, _ = stack.commit_and_push("approvals: add gated")
    stack.wait(lambda: (_sync(stack).get("hold") or {}).get("reason") == "waiting-approval", "the hold", 60)
    assert _sync(stack)["commit"] == sha and _sync(stack)["last_applied"]["commit"] == protect
    assert not _running(client, stack)
    stack.wait(lambda: stack.commit_status(sha) == "running", "phrame/deploy to say it waits", 30)
    secret = (stack.state / "webhook-secret").read_text().strip()
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "phrame",
            "approve",
            stack.environment,
            sha[:12],
            "--url",
            f"http://127.0.0.1:{stack.sync_port}",
        ],
        env={**os.environ, "PHRAME_WEBHOOK_SECRET": secret},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    stack.wait(lambda: _running(client, stack), f"{SERVICE} to run", 90)
    stack.wait(lambda: stack.commit_status(sha) == "success", "phrame/deploy success", 90)
    record = stack.api(f"/api/environments/{stack.environment}")
    deploys = record.get("deploys") or []
    assert deploys and deploys[0]["commit"] == sha, deploys
    assert [a["by"] for a in deploys[0]["approvals"]] == ["webhook-secret"]
