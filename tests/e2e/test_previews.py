"""A merge request's preview through ``phrame dev``: real mosquitto, config-sync, two agents on
the one Docker daemon and the local git host. One stack for the walk-through the docs show
(docs/getting-started.md): push a branch changing the page, post the recorded MR hook with
``phrame replay``, see ``<env>-mr-1`` serve the branch's page on the second node beside the
environment's own (not restarted), update it, close it (its containers and networks go)."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import docker
import pytest

from tests.support.dev_stack import DevStackProcess
from tests.support.services import free_port, require_binary
from tests.support.web import page_text

pytestmark = [pytest.mark.docker, pytest.mark.mqtt, pytest.mark.slow]
HOOKS = Path(__file__).resolve().parents[2] / "fixtures" / "webhooks" / "quickstart"


@pytest.fixture(scope="module")
def preview_port() -> int:
    return free_port()


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory, preview_port: int) -> Iterator[DevStackProcess]:
    require_binary("mosquitto", "mosquitto")
    # one free host port for the preview's page: nothing else on this shared host holds it
    env = {"PHRAME_PREVIEW_PORTS": f"{preview_port}-{preview_port}"}
    s = DevStackProcess(tmp_path_factory.mktemp("e2e-previews"), env=env)
    try:
        s.wait_ready()
        s.wait_settled(120)
        yield s
    finally:
        s.close()


def of_env(client: docker.DockerClient, environment: str) -> dict[str, tuple[str, str]]:
    """container name -> (id, start time) of ``environment``'s containers."""
    found = client.containers.list(
        all=True, filters={"label": f"io.phrame.environment={environment}"}, ignore_removed=True
    )
    return {c.name: (c.id, c.attrs["State"]["StartedAt"]) for c in found}


def networks_of(client: docker.DockerClient, environment: str) -> list[Any]:
    return client.networks.list(filters={"label": f"io.phrame.environment={environment}"})


def page(port: int) -> str:
    return page_text(f"http://127.0.0.1:{port}/")


def replay(stack: DevStackProcess, name: str) -> None:
    done = subprocess.run(
        [
            *(sys.executable, "-m", "phrame", "replay", str(HOOKS / name), "--new-key"),
            *("--url", f"http://127.0.0.1:{stack.sync_port}/webhooks/gitlab"),
            *("--token-file", str(stack.state / "webhook-secret")),
        ],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert done.returncode == 0 and done.stdout.startswith("202 "), done.stdout + done.stderr


def push_branch(stack: DevStackProcess, text: str) -> str:
    web = stack.env_file("services/web.yaml")
    lines = [line for line in web.read_text().splitlines() if not line.startswith("  PAGE_TEXT:")]
    at = lines.index("env:") + 1
    web.write_text("\n".join([*lines[:at], f"  PAGE_TEXT: {text}", *lines[at:]]) + "\n")
    stack.git("commit", "--quiet", "-am", f"preview: {text}")
    stack.git("push", "--quiet", "origin", "HEAD:preview-demo")
    return stack.head()


def test_an_mr_preview_runs_beside_the_environment_moves_with_the_branch_and_goes_on_close(
    client: docker.DockerClient, stack: DevStackProcess, preview_port: int
) -> None:
    preview, node = f"{stack.environment}-mr-1", stack.nodes[1]
    own = of_env(client, stack.environment)
    assert any(".web." in name for name in own) and "Hello from Phrame" in stack.page()
    stack.git("checkout", "--quiet", "-b", "preview-demo")

    first = push_branch(stack, "Hello from a preview")
    replay(stack, "mr-open.json")
    expected = f"Hello from a preview (commit {first[:12]} on node {node})"
    stack.wait(lambda: page(preview_port).startswith(expected), f"{preview} to serve {expected!r}", 60)
    made = of_env(client, preview)
    # on the dev stack's shared daemon a container's name ends with its node
    assert sorted(n.removesuffix(f".{node}") for n in made) == [f"{preview}.cache.0", f"{preview}.web.0"]
    assert networks_of(client, preview)
    assert "Hello from Phrame" in stack.page()
    assert of_env(client, stack.environment) == own  # the same containers, never restarted

    second = push_branch(stack, "Hello again")
    replay(stack, "mr-update.json")
    expected = f"Hello again (commit {second[:12]} on node {node})"
    stack.wait(lambda: page(preview_port).startswith(expected), f"{preview} to move to {second[:12]}", 60)

    replay(stack, "mr-close.json")
    stack.wait(
        lambda: not of_env(client, preview) and not networks_of(client, preview),
        f"{preview}'s containers and networks removed",
        30,
    )
    assert of_env(client, stack.environment) == own and "Hello from Phrame" in stack.page()
