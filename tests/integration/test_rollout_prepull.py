"""Pulling ahead of a rollout's wave, end to end on real parts: config-sync (a real git
remote), two ``phrame node-agent`` processes sharing the one Docker daemon, mosquitto and
Debian's docker-registry behind a TCP proxy the test can cut (a registry that answers
nothing: a pull that hangs, as a slow edge link's does).

While the new image cannot be pulled, the old replicas keep running and the rollout says
which wave waits for which pull; once the nodes report it pulled, each replace is a stop and
a start. A tag that does not exist fails the rollout, naming the node and the image, before
any replica is stopped.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import docker
import docker.errors
import pytest

from config_sync.reporting import LocalReporter
from config_sync.service import ConfigSync
from schemas import Topics, check_payload
from schemas.container_exits import docker_time
from tests.support.agent_support import AgentProcess, open_policy_file
from tests.support.mosquitto import Mosquitto
from tests.support.registry import Registry
from tests.support.services import eventually
from tests.support.sync_support import ConfigRemote, desired_on_broker, reader, settings_for
from tests.support.tcp_proxy import PartitionProxy
from tests.support.waiting import wait_for

pytestmark = [pytest.mark.docker, pytest.mark.mqtt, pytest.mark.slow]
T = Topics()
WAVES_OF_ONE = "  max_parallel: 1\n  min_healthy_s: 0\n  healthy_deadline_s: 60\n"


class Setup:
    def __init__(self, tmp_path: Path, client: docker.DockerClient, registry: Registry) -> None:
        tag = uuid.uuid4().hex[:6]
        self.nodes = (f"pp{tag}a", f"pp{tag}b")
        self.tmp, self.client, self.registry = tmp_path, client, registry
        self.proxy = PartitionProxy(registry.port)
        self.name = f"phrame-prepull-{tag}"
        self.repo = f"127.0.0.1:{self.proxy.port}/{self.name}"  # what the agents pull from
        self.remote = ConfigRemote(tmp_path)
        self.agents: list[AgentProcess] = []

    def push(self, busybox: str, *tags: str) -> None:
        """Push busybox as ``tags`` straight to the registry; nothing of them stays local."""
        direct = f"{self.registry.url}/{self.name}"
        for tag in tags:
            self.client.images.get(busybox).tag(direct, tag)
            try:
                for line in self.client.api.push(
                    direct, tag, auth_config=self.registry.auth_config, stream=True, decode=True
                ):
                    assert "error" not in line, line
            finally:
                self.client.images.remove(f"{direct}:{tag}")

    def files(self, tag: str) -> dict[str, str]:
        files = {f"nodes/{n}.yaml": f"name: {n}\nlabels:\n  role: edge\n" for n in self.nodes}
        files["environments/lab/environment.yaml"] = "name: lab\n"
        files["environments/lab/node.json"] = json.dumps(
            {"schema": "phrame.placement/v1", "environment": "lab", "assignments": {"web": list(self.nodes)}}
        )
        files["environments/lab/services/web.yaml"] = (
            f"name: web\nimage: {self.repo}:{tag}\ncommand: [sleep, '3600']\nreplicas: 2\n"
            f"placement:\n  labels:\n    role: edge\nupdate:\n{WAVES_OF_ONE}"
        )
        return files

    def start_agent(self, node: str, broker: str) -> None:
        state = self.tmp / f"agent-{node}"
        state.mkdir()
        env = {k: v for k, v in os.environ.items() if not k.startswith("PHRAME_")}
        env |= {
            "PHRAME_NODE_NAME": node,
            "PHRAME_STATE_DIR": str(state / "state"),
            "PHRAME_DESIRED_MQTT_URL": broker,
            "PHRAME_SHARED_DAEMON": "1",
            "PHRAME_STOP_TIMEOUT_S": "1",
            "PHRAME_HEARTBEAT_S": "0.5",
            "PHRAME_RESYNC_S": "1",
            "PHRAME_PULL_PARALLELISM": "1",
            "PHRAME_POLICY_FILE": open_policy_file(state),
            "PHRAME_REGISTRY_URL": f"127.0.0.1:{self.proxy.port}",
            "PHRAME_REGISTRY_USERNAME": self.registry.username,
            "PHRAME_REGISTRY_PASSWORD": self.registry.password,
        }
        self.agents.append(AgentProcess(env, str(self.tmp / f"agent-{node}.log")))

    def containers(self) -> dict[str, Any]:
        """Replica -> its container (running or not), across both nodes."""
        out = {}
        for node in self.nodes:
            for c in self.client.containers.list(
                all=True, filters={"label": f"io.phrame.node={node}"}, ignore_removed=True
            ):
                out[c.labels["io.phrame.replica"]] = c
        return out

    def close(self) -> None:
        for agent in self.agents:
            agent.terminate()
        for c in self.containers().values():
            with contextlib.suppress(docker.errors.NotFound):
                c.remove(force=True)
        for image in self.client.images.list(name=self.repo):  # this test's repository only
            for tag in image.tags:
                if tag.startswith(self.repo + ":"):
                    with contextlib.suppress(docker.errors.APIError):
                        self.client.images.remove(tag)
        self.proxy.close()


@pytest.fixture
def setup(
    tmp_path: Path, docker_client: docker.DockerClient, registry: Registry, busybox_image: str
) -> Iterator[Setup]:
    s = Setup(tmp_path, docker_client, registry)
    try:
        s.push(busybox_image, "1", "2")
        yield s
    finally:
        s.close()


def _rollout(watch: Any) -> dict[str, Any]:
    raw = desired_on_broker(watch).get(T.env_rollout("lab", "web"))
    doc = json.loads(raw) if raw else {}
    if doc:
        check_payload("desired-rollout", doc)
    return doc


def _statuses(watch: Any, nodes: tuple[str, ...]) -> dict[str, dict[str, Any]]:
    held = watch.collect_retained(T.node_status_filter(), settle=0.2)
    return {n: json.loads(held[T.status(n)]) for n in nodes if held.get(T.status(n))}


def _running_ids(s: Setup) -> dict[str, str]:
    return {r: c.id for r, c in s.containers().items() if c.status == "running"}


def test_a_wave_waits_for_a_slow_pull_with_its_old_replicas_running_and_a_failed_pull_stops_nothing(
    setup: Setup, mosquitto: Mosquitto
) -> None:
    s = setup
    s.remote.commit("v1", files=s.files("1"))
    service = ConfigSync(
        settings_for(
            s.remote, s.tmp / "sync", mosquitto.url, poll_s=3600, debounce_s=0, deploy_timeout_s=120
        ),
        reporter=LocalReporter(),
    )
    service.start()
    try:
        assert service.queue.wait_idle(30)
        for node in s.nodes:
            s.start_agent(node, mosquitto.url)
        with reader(mosquitto.url, "prepull-watch") as watch:
            wait_for(lambda: len(_running_ids(s)) == 2, "both replicas running :1", 90)
            wait_for(
                lambda: (
                    all("prefetch" in st for st in _statuses(watch, s.nodes).values())
                    and len(_statuses(watch, s.nodes)) == 2
                ),
                "both agents report what they pull ahead",
                30,
            )
            before = _running_ids(s)

            # the registry stops answering: a pull of :2 hangs (the agents have :1's layers,
            # so nothing but the registry's answer is missing)
            s.proxy.partition()
            v2 = s.remote.commit("v2", files=s.files("2"))
            service.trigger_sync("main")
            assert service.queue.wait_idle(30)
            image = f"{s.repo}:2"
            wait_for(
                lambda: all(
                    (st.get("prefetch") or {}).get(image, {}).get("state") == "pulling"
                    for st in _statuses(watch, s.nodes).values()
                ),
                "both nodes pulling :2 ahead of the waves",
                30,
            )
            state = _rollout(watch)
            assert state["commit"] == v2 and state["state"] == "progressing" and state["wave"] == 0
            assert {p["node"] for p in state["pulling"]} == {s.nodes[0]}  # the first wave's node
            assert "waits for 1 image pull(s)" in state["description"]
            held = desired_on_broker(watch)
            for node in s.nodes:  # each agent asked for its image on prefetch/lab
                assert json.loads(held[T.prefetch(node, "lab")]) == {"images": [image]}
            # while the pull hangs, nothing is stopped: the old replicas run on
            assert not eventually(lambda: _running_ids(s) != before, timeout=2.0)
            assert all(c.attrs["Config"]["Image"] == f"{s.repo}:1" for c in s.containers().values())

            healed = time.time()
            s.proxy.heal()
            wait_for(lambda: _rollout(watch).get("state") == "complete", "the rollout to complete", 120)
            done = _rollout(watch)
            after = s.containers()
            assert set(after) == {"0", "1"} and all(c.status == "running" for c in after.values())
            for replica in done["replicas"]:
                c = after[replica["replica"].rsplit(".", 1)[-1]]
                assert c.id not in before.values()
                # released only once its node had the image: the wave followed the pull...
                assert replica["released_at"] >= healed
                # ...and its replace was a stop and a start, no pull (generous on a loaded host)
                created = docker_time(c.attrs["Created"])
                assert created - replica["released_at"] < 15, (created, replica)
            held = desired_on_broker(watch)
            assert not any(held.get(T.prefetch(n, "lab")) for n in s.nodes)  # hints cleared

            # a tag that is not in the registry: reported as a failed pull, nothing stopped
            before = _running_ids(s)
            v3 = s.remote.commit("v3", files=s.files("missing"))
            service.trigger_sync("main")
            assert service.queue.wait_idle(30)
            wait_for(lambda: _rollout(watch).get("state") == "paused", "the rollout paused", 90)
            state = _rollout(watch)
            assert state["commit"] == v3 and state["wave"] == 0
            (reason,) = state["reasons"]
            assert reason["node"] == s.nodes[0] and f"pull of {s.repo}:missing failed" in reason["reason"]

            def deploy_v3() -> list[dict]:  # reported after the rollout's state is published
                return [
                    x
                    for x in service.reporter.snapshot()["statuses"]
                    if x["name"] == "phrame/deploy" and x["sha"] == v3
                ]

            wait_for(lambda: deploy_v3() and deploy_v3()[-1]["state"] == "failed", "phrame/deploy failed", 30)
            deploy = deploy_v3()
            assert f"{s.nodes[0]} lab.web.0: pull of {s.repo}:missing failed" in deploy[-1]["description"]
            assert _running_ids(s) == before
    finally:
        service.stop()
