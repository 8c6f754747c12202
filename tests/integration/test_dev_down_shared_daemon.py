"""``phrame dev --down`` on a shared daemon: other stacks' managed containers that vanish while
it lists them (removed by their own owners at the same moment) never stop it removing its own."""

from __future__ import annotations

import threading
import uuid

import docker
import pytest

from dev_stack.docker_host import remove_nodes_objects
from tests.support.docker import labels

pytestmark = pytest.mark.docker
MANAGED = "io.phrame.managed"
NODE = "io.phrame.node"
OTHERS = 40


@pytest.mark.slow
def test_containers_removed_by_others_meanwhile_do_not_stop_the_removal_of_ours(
    docker_client: docker.DockerClient, busybox_image: str, docker_cleanup: str
) -> None:
    tag = uuid.uuid4().hex[:8]
    mine, theirs = f"mine-{tag}", f"theirs-{tag}"

    def create(node: str, name: str) -> str:
        c = docker_client.containers.create(
            busybox_image,
            ["true"],
            name=name,
            labels=labels(docker_cleanup) | {MANAGED: "true", NODE: node},
        )
        return str(c.id)

    ours = create(mine, f"{mine}-web")
    others = [create(theirs, f"{theirs}-{i}") for i in range(OTHERS)]
    removing = threading.Event()

    def their_owner() -> None:  # another stack's down, at the same moment as ours
        removing.set()
        for cid in others:
            docker_client.api.remove_container(cid, force=True)

    owner = threading.Thread(target=their_owner)
    owner.start()
    removing.wait(5)
    errors: list[Exception] = []
    try:
        while owner.is_alive():  # each listing races the removals
            try:
                remove_nodes_objects(docker_client, (mine,))
            except docker.errors.DockerException as e:
                errors.append(e)
                break
    finally:
        owner.join(60)
    assert not errors, f"a container removed by its owner meanwhile stopped ours: {errors[0]!r}"
    gone = docker_client.containers.list(all=True, filters={"id": ours})
    assert gone == [], "our container is still there"
