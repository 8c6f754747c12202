"""A deployment's health over a real broker and a real git remote: the ``deploys`` record
and ``phrame/deploy`` say at once what the one health function says. A missing image fails
with the node's reason (a real agent on the real daemon), a label-placed service no node
can take is degraded and never converged, and a staged rollout's record lists every node
of every wave, its waves and the time it waited for a promotion apart."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from config_sync.service import ConfigSync
from phrame.mqtt import MqttClient
from schemas import Topics, check_payload
from tests.support.agent_support import AgentEnv, AgentProcess
from tests.support.mosquitto import Mosquitto
from tests.support.services import eventually
from tests.support.sync_support import ConfigRemote, desired_on_broker, reader, running_sync, settings_for

T = Topics()


def records(client: MqttClient, env: str) -> list[dict[str, Any]]:
    raw = client.collect_retained(T.env_deploys(env), settle=0.1).get(T.env_deploys(env))
    if not raw:
        return []
    doc = json.loads(raw)
    check_payload("desired-deploys", doc)
    return list(doc["deploys"])


def deploy_status(service: ConfigSync, sha: str) -> tuple[str, str] | None:
    found = [
        (s["state"], s["description"])
        for s in service.reporter.snapshot()["statuses"]
        if s["name"] == "phrame/deploy" and s["sha"] == sha
    ]
    return found[-1] if found else None


@pytest.mark.slow
def test_a_missing_image_fails_with_its_reason_long_before_the_deploy_timeout(
    tmp_path: Path, mosquitto: Mosquitto, env: AgentEnv
) -> None:
    remote = ConfigRemote(tmp_path / "git")
    service_file = f'name: web\nimage: 127.0.0.1:9/absent:1\nrestart: "no"\nplacement:\n  node: {env.node}\n'
    sha = remote.commit(
        "web: an image that does not exist",
        files={
            f"nodes/{env.node}.yaml": f"name: {env.node}\n",
            f"environments/{env.env}/environment.yaml": f"name: {env.env}\n",
            f"environments/{env.env}/services/web.yaml": service_file,
        },
    )
    agent = AgentProcess(
        env.process_env(str(tmp_path / "agent"), PHRAME_DESIRED_MQTT_URL=mosquitto.url),
        str(tmp_path / "agent.log"),
    )
    # the timeout stays for silence only: an error the node reports fails the deployment now
    settings = settings_for(
        remote, tmp_path / "sync", mosquitto.url, poll_s=3600, debounce_s=0, deploy_timeout_s=600
    )
    try:
        with running_sync(settings) as service, reader(mosquitto.url) as client:
            assert eventually(lambda: [d["state"] for d in records(client, env.env)] == ["failed"], 60), (
                agent.log()
            )
            (record,) = records(client, env.env)
            assert record["commit"] == sha and record["health"] == "failed"
            assert record["failed"]["node"] == env.node and "absent" in record["failed"]["reason"]
            assert record["reasons"][0]["node"] == env.node and "absent" in record["reasons"][0]["reason"]
            assert record["replicas"] == {f"{env.env}.web.0": env.node}
            assert eventually(lambda: (deploy_status(service, sha) or ("",))[0] == "failed", 10)
            _state, text = deploy_status(service, sha) or ("", "")
            assert text.startswith(f"{env.node}: ") and "absent" in text
    finally:
        agent.terminate()
        for c in env.managed():
            c.remove(force=True)


@pytest.mark.slow
def test_a_crash_looping_replica_is_degraded_never_converged(
    tmp_path: Path, mosquitto: Mosquitto, env: AgentEnv
) -> None:
    remote = ConfigRemote(tmp_path / "git")
    crashing = (
        f'name: web\nimage: {env.image}\ncommand: ["sh", "-c", "sleep 0.3; exit 3"]\n'
        f"restart: always\nplacement:\n  node: {env.node}\n"
    )
    sha = remote.commit(
        "web: exits at once",
        files={
            f"nodes/{env.node}.yaml": f"name: {env.node}\n",
            f"environments/{env.env}/environment.yaml": f"name: {env.env}\n",
            f"environments/{env.env}/services/web.yaml": crashing,
        },
    )
    agent = AgentProcess(
        env.process_env(str(tmp_path / "agent"), PHRAME_DESIRED_MQTT_URL=mosquitto.url),
        str(tmp_path / "agent.log"),
    )
    settings = settings_for(
        remote, tmp_path / "sync", mosquitto.url, poll_s=3600, debounce_s=0, deploy_timeout_s=600
    )
    try:
        with running_sync(settings) as service, reader(mosquitto.url) as client:
            seen: set[str] = set()

            def finished() -> bool:
                states = [d["state"] for d in records(client, env.env)]
                seen.update(states)
                return bool(states) and states[0] != "pending"

            assert eventually(finished, 60), agent.log()
            (record,) = records(client, env.env)
            assert "converged" not in seen
            assert (record["commit"], record["state"], record["health"]) == (sha, "degraded", "degraded")
            first = record["reasons"][0]
            assert (first["node"], first["replica"]) == (env.node, f"{env.env}.web.0")
            assert first["reason"].startswith("crash-looping: restarted"), record
            # the deployment is judged in its own step of the watcher's tick: waited for too
            assert eventually(lambda: (deploy_status(service, sha) or ("",))[0] == "failed", 10)
    finally:
        agent.terminate()
        for c in env.managed():
            c.remove(force=True)


def test_an_unassignable_label_placed_service_is_degraded_never_converged(
    tmp_path: Path, mosquitto: Mosquitto
) -> None:
    remote = ConfigRemote(tmp_path / "git")
    sha = remote.commit(
        "gpu: needs a node with a GPU",
        files={
            "nodes/n1.yaml": "name: n1\nlabels:\n  role: edge\n",
            "environments/lab/environment.yaml": "name: lab\n",
            "environments/lab/services/gpu.yaml": 'name: gpu\nimage: gpu:1\nplacement:\n  labels:\n    gpu: "true"\n',
        },
    )
    settings = settings_for(
        remote, tmp_path / "sync", mosquitto.url, poll_s=3600, debounce_s=0, deploy_timeout_s=600
    )
    with running_sync(settings) as service, reader(mosquitto.url) as client:
        assert service.queue.wait_idle(30)
        assert eventually(lambda: len(records(client, "lab")) == 1, 10)
        (pending,) = records(client, "lab")
        assert pending["state"] == "pending" and pending["replicas"] == {"lab.gpu.0": None}
        assert (deploy_status(service, sha) or ("",))[0] == "running"
        # placement finds no node for it and says why in its retained state
        why = "no online node has the labels gpu=true"
        doc = {"environment": "lab", "unassigned": [{"replica": "gpu.0", "reason": why}]}
        check_payload("desired-placement", doc)
        client.publish_batch([(T.env_placement("lab"), json.dumps(doc).encode())])
        assert eventually(lambda: records(client, "lab")[0]["state"] != "pending", 10)
        (record,) = records(client, "lab")
        assert (record["state"], record["health"]) == ("degraded", "degraded")
        assert record["reasons"] == [{"node": "", "replica": "lab.gpu.0", "reason": f"unassigned: {why}"}]
        assert eventually(
            lambda: deploy_status(service, sha) == ("failed", f"degraded: lab.gpu.0: unassigned: {why}"), 10
        ), deploy_status(service, sha)
        client.publish_batch([(T.env_placement("lab"), None)])


NODES = ("n1", "n2")
CANARY = "  max_parallel: 1\n  canary: 1\n  min_healthy_s: 0.2\n  healthy_deadline_s: 30\n"


def _files(image: str) -> dict[str, str]:
    files = {f"nodes/{n}.yaml": f"name: {n}\nlabels:\n  role: edge\n" for n in NODES}
    files["environments/lab/environment.yaml"] = "name: lab\n"
    files["environments/lab/node.json"] = json.dumps(
        {"schema": "phrame.placement/v1", "environment": "lab", "assignments": {"web": ["n1", "n2"]}}
    )
    files["environments/lab/services/web.yaml"] = (
        f"name: web\nimage: {image}\nreplicas: 2\nplacement:\n  labels:\n    role: edge\nupdate:\n{CANARY}"
    )
    return files


@pytest.fixture
def agents(mosquitto: Mosquitto) -> Iterator[MqttClient]:
    with reader(mosquitto.url, "fake-agents") as client:
        yield client


def _run_what_is_published(agents: MqttClient, broker: dict[str, bytes]) -> None:
    """Stand in for both agents: run each published container, converge on each manifest."""
    batch: list[tuple[str, bytes | None]] = []
    for node, item in (("n1", "lab.web.0"), ("n2", "lab.web.1")):
        raw = broker.get(T.desired_item(node, "containers", item))
        manifest = broker.get(T.manifest(node))
        if not raw or not manifest:
            continue
        digest = json.loads(raw)["digest"]
        doc = {
            "state": "running",
            "health": None,
            "digest": digest,
            "started_at": f"t-{digest[-6:]}",
            "restart_count": 0,
        }
        batch.append((T.actual_item(node, "containers", item), json.dumps(doc).encode()))
        m = json.loads(manifest)
        status = {"state": "online", "commit": m["commit"], "generation": m["generation"], "converged": True}
        batch.append((T.status(node), json.dumps(status).encode()))
    agents.publish_batch(batch)


@pytest.mark.slow
def test_a_staged_rollouts_record_lists_every_node_of_every_wave(
    tmp_path: Path, mosquitto: Mosquitto, agents: MqttClient
) -> None:
    remote = ConfigRemote(tmp_path / "git")
    remote.commit("v1", files=_files("web:1"))
    settings = settings_for(
        remote, tmp_path / "sync", mosquitto.url, poll_s=3600, debounce_s=0, deploy_timeout_s=60
    )
    with running_sync(settings) as service, reader(mosquitto.url) as watch:
        assert service.queue.wait_idle(30)
        _run_what_is_published(agents, desired_on_broker(watch))
        assert eventually(lambda: records(watch, "lab")[0]["state"] == "converged", 10)
        v2 = remote.commit("v2", files=_files("web:2"))
        service.trigger_sync("main")

        def rollout_state() -> str:
            raw = desired_on_broker(watch).get(T.env_rollout("lab", "web"))
            return json.loads(raw)["state"] if raw else ""

        def waiting() -> bool:
            _run_what_is_published(agents, desired_on_broker(watch))
            return rollout_state() == "waiting-promotion"

        assert eventually(waiting, 15, interval=0.2)
        assert eventually(lambda: records(watch, "lab")[0]["health"] == "suspended", 10)
        pending = records(watch, "lab")[0]
        assert (pending["commit"], pending["state"]) == (v2, "pending")  # not converged on the canary alone
        assert service.rollouts.promote("lab", "web", v2).is_taken

        def complete() -> bool:
            _run_what_is_published(agents, desired_on_broker(watch))
            return rollout_state() == "complete" and records(watch, "lab")[0]["state"] != "pending"

        assert eventually(complete, 15, interval=0.2)
        record = records(watch, "lab")[0]
        assert (record["commit"], record["state"], record["health"]) == (v2, "converged", "healthy")
        assert set(record["nodes"]) == {"n1", "n2"}
        assert record["replicas"] == {"lab.web.0": "n1", "lab.web.1": "n2"}
        assert [(w["wave"], w["nodes"]) for w in record["waves"]] == [(1, ["n1"]), (2, ["n2"])]
        assert record["suspended_s"] > 0 and record["suspended_since"] is None
        # the wait for a person is the canary wave's, apart from its working time
        canary, rest = record["waves"]
        assert canary["waited_s"] == pytest.approx(record["suspended_s"], abs=0.01) and rest["waited_s"] == 0
        assert canary["took_s"] < rest["released_at"] - canary["released_at"] and rest["took_s"] >= 0
        total = record["finished_at"] - record["published_at"]
        assert record["duration_s"] == pytest.approx(total - record["suspended_s"], abs=0.01)
