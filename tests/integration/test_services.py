"""Smoke tests of the test support itself: broker, Docker, busybox image, registry, cleanup.

If one of these fails, every integration test built on the same fixture is suspect, so
each asserts the behaviour other tests rely on (retained delivery, labelled cleanup that
spares other labels, registry auth that really refuses a wrong password).
"""

from __future__ import annotations

import contextlib
import queue
import uuid
from pathlib import Path

import docker
import docker.errors
import paho.mqtt.client as mqtt
import pytest
from paho.mqtt.enums import CallbackAPIVersion

from tests.support import docker as docker_support
from tests.support.docker import TEST_LABEL
from tests.support.mosquitto import Mosquitto
from tests.support.registry import Registry
from tests.support.services import services_required

Received = tuple[str, bytes, bool]


def connected_client(broker: Mosquitto, inbox: queue.Queue[Received] | None = None) -> mqtt.Client:
    client = mqtt.Client(CallbackAPIVersion.VERSION2, client_id=f"phrame-test-{uuid.uuid4().hex}")
    if inbox is not None:
        client.on_message = lambda _c, _u, msg: inbox.put((msg.topic, bytes(msg.payload), msg.retain))
    client.connect("127.0.0.1", broker.port)
    client.loop_start()
    return client


def close(client: mqtt.Client) -> None:
    client.disconnect()
    client.loop_stop()


def test_retained_message_reaches_a_later_subscriber(mosquitto: Mosquitto) -> None:
    base = f"phrame-test/{uuid.uuid4().hex}"
    publisher = connected_client(mosquitto)
    try:
        publisher.publish(f"{base}/retained", b'{"n": 1}', qos=1, retain=True).wait_for_publish(5)
        publisher.publish(f"{base}/transient", b"gone", qos=1).wait_for_publish(5)
    finally:
        close(publisher)

    inbox: queue.Queue[Received] = queue.Queue()
    subscriber = connected_client(mosquitto, inbox)
    try:
        subscriber.subscribe(f"{base}/#", qos=1)
        topic, payload, retained = inbox.get(timeout=5)
        assert (topic, payload, retained) == (f"{base}/retained", b'{"n": 1}', True)
        with pytest.raises(queue.Empty):  # a non-retained message is not replayed
            inbox.get(timeout=0.5)
    finally:
        close(subscriber)


def test_busybox_container_runs_and_cleanup_removes_only_its_label(
    docker_client: docker.DockerClient, busybox_image: str, docker_cleanup: str
) -> None:
    other = f"{docker_cleanup}-other"
    mine = docker_client.containers.run(
        busybox_image,
        ["sh", "-c", "echo hi"],
        labels=docker_support.labels(docker_cleanup),
        detach=True,
    )
    spared = docker_client.containers.create(
        busybox_image, ["sleep", "60"], labels=docker_support.labels(other)
    )
    try:
        assert mine.wait(timeout=30)["StatusCode"] == 0
        assert mine.logs() == b"hi\n"
        assert docker_client.containers.get(mine.id).labels[TEST_LABEL] == docker_cleanup

        removed = docker_support.cleanup(docker_client, docker_cleanup)

        assert removed == [f"container/{mine.name}"]
        with pytest.raises(docker.errors.NotFound):
            docker_client.containers.get(mine.id)
        assert docker_client.containers.get(spared.id).labels[TEST_LABEL] == other
    finally:
        docker_support.cleanup(docker_client, other)
    with pytest.raises(docker.errors.NotFound):
        docker_client.containers.get(spared.id)


def test_busybox_image_has_no_default_command(
    docker_client: docker.DockerClient, busybox_image: str, docker_cleanup: str
) -> None:
    config = docker_client.images.get(busybox_image).attrs["Config"]
    assert not config.get("Cmd") and not config.get("Entrypoint")
    with pytest.raises(docker.errors.APIError, match=r"(?i)no command"):
        docker_client.containers.create(busybox_image, labels=docker_support.labels(docker_cleanup))


def test_cleanup_removes_labelled_networks(docker_client: docker.DockerClient, docker_cleanup: str) -> None:
    other = f"{docker_cleanup}-other"
    mine = docker_client.networks.create(
        f"phrame-test-{uuid.uuid4().hex[:10]}",
        internal=True,
        labels=docker_support.labels(docker_cleanup),
    )
    spared = docker_client.networks.create(
        f"phrame-test-{uuid.uuid4().hex[:10]}", internal=True, labels=docker_support.labels(other)
    )
    try:
        assert docker_support.cleanup(docker_client, docker_cleanup) == [f"network/{mine.name}"]
        with pytest.raises(docker.errors.NotFound):
            docker_client.networks.get(mine.id)
        docker_client.networks.get(spared.id)  # still there
    finally:
        docker_support.cleanup(docker_client, other)
    with pytest.raises(docker.errors.NotFound):
        docker_client.networks.get(spared.id)


def push_errors(client: docker.DockerClient, repository: str, tag: str, auth: dict[str, str]) -> list[str]:
    lines = client.images.push(repository, tag=tag, auth_config=auth, stream=True, decode=True)
    return [str(line["error"]) for line in lines if "error" in line]


def test_registry_refuses_wrong_password_and_round_trips_an_image(
    docker_client: docker.DockerClient,
    busybox_image: str,
    registry: Registry,
    docker_cleanup: str,
) -> None:
    wrong = {"username": registry.username, "password": "wrong-" + registry.password}
    with pytest.raises(docker.errors.APIError, match=r"(?i)unauthorized|401"):
        docker_client.login(wrong["username"], wrong["password"], registry=registry.url)
    docker_client.login(registry.username, registry.password, registry=registry.url, reauth=True)

    repository, tag = f"{registry.url}/phrame-test/busybox", uuid.uuid4().hex[:12]
    reference = f"{repository}:{tag}"
    assert docker_client.images.get(busybox_image).tag(repository, tag)
    try:
        assert push_errors(docker_client, repository, tag, wrong)  # refused without credentials
        assert push_errors(docker_client, repository, tag, registry.auth_config) == []
        assert "phrame-test/busybox" in registry.catalog()

        docker_client.images.remove(reference)
        with pytest.raises(docker.errors.ImageNotFound):
            docker_client.images.get(reference)
        with pytest.raises(docker.errors.APIError):
            docker_client.images.pull(repository, tag=tag, auth_config=wrong)
        docker_client.images.pull(repository, tag=tag, auth_config=registry.auth_config)

        pulled = docker_client.containers.run(
            reference,
            ["sh", "-c", "echo pulled"],
            labels=docker_support.labels(docker_cleanup),
            detach=True,
        )
        assert pulled.wait(timeout=30)["StatusCode"] == 0
        assert pulled.logs() == b"pulled\n"
    finally:
        docker_support.cleanup(docker_client, docker_cleanup)
        with contextlib.suppress(docker.errors.ImageNotFound):
            docker_client.images.remove(reference)


def test_missing_daemon_skips_locally_and_fails_when_services_are_required(
    tmp_path: Path,
) -> None:
    outcome = pytest.fail.Exception if services_required() else pytest.skip.Exception
    with pytest.raises(outcome, match="no Docker daemon answers"):
        docker_support.docker_client(base_url=f"unix://{tmp_path}/absent.sock")
