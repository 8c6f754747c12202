"""A release by tag through ``phrame dev``: an environment tracking ``refs/tags/v1``.

Its own stack (real mosquitto, config-sync, placement, one agent on the Docker daemon, the
local git host whose hook posts GitLab's Tag Push Hook). ``git tag v1`` + ``git push origin
v1`` deploys the environment to the node; force-moving the tag deploys the new commit;
placement never writes to the tag. The poll is 600 s: every deploy comes from the hook.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import docker
import pytest

from tests.support.dev_stack import DevStackProcess
from tests.support.services import require_binary

pytestmark = [pytest.mark.docker, pytest.mark.mqtt, pytest.mark.slow]
TAG = "refs/tags/v1"


@pytest.fixture(scope="module")
def stack(client: docker.DockerClient, tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevStackProcess]:
    require_binary("mosquitto", "mosquitto")
    s = DevStackProcess(tmp_path_factory.mktemp("e2e-tag"), nodes=1)
    try:
        s.wait_ready()
        s.wait(lambda: all(s.is_converged(n) for n in s.nodes), "the node converged on the sample", 120)
        yield s
    finally:
        down = s.close()
        left = [c.name for c in release_containers(client, s, all_states=True)]
        assert not left, f"phrame dev --down --purge left {left}:\n{down}"


def release_containers(
    client: docker.DockerClient, stack: DevStackProcess, *, all_states: bool = False
) -> list[Any]:
    found = client.containers.list(
        all=all_states, filters={"label": "io.phrame.managed=true"}, ignore_removed=True
    )
    return [
        c
        for c in found
        if c.labels.get("io.phrame.node") in stack.nodes and c.labels.get("io.phrame.service") == "release"
    ]


def release_service(stack: DevStackProcess, round_: str) -> str:
    return (
        "name: release\nimage: phrame-quickstart/busybox:1\n"
        "command: [sh, -c, \"trap 'exit 0' TERM; while true; do sleep 3600 & wait; done\"]\n"
        f"env:\n  RELEASE: '{round_}'\n"
        f"placement:\n  node: {stack.nodes[0]}\n"
    )


def release_env(client: docker.DockerClient, stack: DevStackProcess) -> str | None:
    """RELEASE of the running release container (None: not running)."""
    for c in release_containers(client, stack):
        try:
            c.reload()
        except docker.errors.NotFound:  # replaced by the new release meanwhile
            continue
        if c.status == "running":
            env = dict(e.split("=", 1) for e in c.attrs["Config"]["Env"])
            return env.get("RELEASE")
    return None


def remote_tag(stack: DevStackProcess) -> str:
    bare = str(stack.state / "config.git")
    return stack.git("--git-dir", bare, "rev-parse", f"{TAG}^{{commit}}").strip()


def test_a_pushed_tag_deploys_and_a_moved_tag_deploys_its_new_commit(client, stack: DevStackProcess):
    env = f"{stack.environment}t"
    folder = stack.clone / "environments" / env
    (folder / "services").mkdir(parents=True)
    (folder / "environment.yaml").write_text(f"name: {env}\ntrack: {TAG}\nplacement: review\n")
    (folder / "services" / "release.yaml").write_text(release_service(stack, "1"))
    first, _ = stack.commit_and_push("e2e: an environment released by tag v1")
    # on main alone it is declared, not deployed: nothing runs until the tag exists
    stack.wait(lambda: TAG in stack.sync_status()["tracked_refs"], "config-sync to track the tag", 30)
    assert release_env(client, stack) is None

    stack.git("tag", "v1", first)
    pushed = stack.git("push", "origin", "v1")
    assert "config-sync notified (202)" in pushed
    stack.wait(lambda: release_env(client, stack) == "1", "release 1 running from the tag", 90)
    stack.wait(
        lambda: stack.commit_status(first) == "success", "phrame/deploy success on the tag's commit", 60
    )
    assert stack.commit_status(first, "phrame/validate") == "success"

    (folder / "services" / "release.yaml").write_text(release_service(stack, "2"))
    second, _ = stack.commit_and_push("e2e: release 2")
    stack.git("tag", "-f", "v1", second)
    stack.git("push", "--force", "origin", "v1")
    stack.wait(lambda: release_env(client, stack) == "2", "release 2 running after the tag moved", 90)
    stack.wait(lambda: stack.commit_status(second) == "success", "phrame/deploy success on the moved tag", 60)
    worker = stack.sync_status()["workers"][f"ref:{TAG}"]
    assert worker["failures"] == 0, worker["last_error"]
    assert remote_tag(stack) == second  # placement never wrote to the tag
