"""``export_node``: one node's desired payloads → a docker-compose.yml that runs the same
containers, with secrets as references and nothing the agent would take for its own."""

from __future__ import annotations

import copy
from typing import Any

from ruamel.yaml import YAML

from phrame.compose import export_node
from schemas import Topics
from tests.support.compose_repo import container_payload, studio_topics


def load(text: str) -> Any:
    return YAML(typ="safe").load(text)


def test_secrets_stay_references_and_processes_are_listed() -> None:
    text = export_node(studio_topics(), "edge-01")
    doc = load(text)
    env = doc["services"]["input-proc"]["environment"]
    assert env["INPUT_PROC_LICENSE_KEY"].startswith("${INPUT_PROC_KEY:?")
    assert doc["x-phrame"]["secrets"] == {"INPUT_PROC_KEY": "input-proc.key"}
    assert "INPUT_PROC_KEY: PHRAME_SECRETS_DIR/input-proc.key" in text
    # the process has no compose form: a comment on top, and its id under x-phrame
    assert "#   studio-a.ptp-monitor.0: /opt/ptp-monitor/bin/ptp-monitor --interface eno1" in text
    assert doc["x-phrame"]["processes"] == ["studio-a.ptp-monitor.0"]
    assert "ptp-monitor" not in doc["services"]


def test_fields_map_to_compose_and_no_agent_label_is_written() -> None:
    doc = load(export_node(studio_topics(), "edge-01"))
    svc = doc["services"]["input-proc"]
    assert svc["ports"] == ["127.0.0.1:9001:9001", "127.0.0.1:5000:5000/udp"]
    assert svc["networks"] == ["media", "control"] and svc["cpus"] == 2 and svc["mem_limit"] == "4g"
    assert svc["healthcheck"]["test"][0] == "CMD" and svc["restart"] == "unless-stopped"
    assert not any(k.startswith("io.phrame.") for s in doc["services"].values() for k in s.get("labels", {}))
    assert svc["x-phrame"] == {
        "environment": "studio-a", "service": "input-proc", "items": ["studio-a.input-proc.0"], "commit": "worktree",
    }  # fmt: skip
    assert doc["networks"]["control"] == {
        "driver": "bridge",
        "internal": True,
        "ipam": {"config": [{"subnet": "10.77.1.0/24"}]},
        "labels": {"plane": "control"},
    }


def test_depends_on_waits_for_health_where_there_is_a_check() -> None:
    doc = load(export_node(studio_topics(), "edge-02"))
    # input-proc runs on edge-01: ordering is local, so edge-02's mixer waits for nothing
    assert "depends_on" not in doc["services"]["mixer"]
    topics = studio_topics()
    edge1 = {t: p for t, p in topics.items() if "/edge-01/" in t}
    mixer = copy.deepcopy(topics["phrame/desired/nodes/edge-02/containers/studio-a.mixer.0"])
    mixer["depends_on"] = ["studio-a.input-proc.0", "studio-a.ptp-monitor-legacy.0"]
    edge1["phrame/desired/nodes/edge-01/containers/studio-a.mixer.0"] = mixer
    deps = load(export_node(edge1, "edge-01"))["services"]["mixer"]["depends_on"]
    assert deps == {
        "input-proc": {"condition": "service_healthy"},
        "ptp-monitor-legacy": {"condition": "service_started"},
    }


def test_replicas_scale_dollars_escape_and_restart_no_stays_text() -> None:
    topics = dict(
        [
            container_payload("a", "web", 0, command=["sh", "-c", "echo $HOME"]),
            container_payload("a", "web", 1, command=["sh", "-c", "echo $HOME"]),
            container_payload(
                "a",
                "job",
                0,
                labels={"cost": "$5"},
                ports=[{"host_ip": "127.0.0.1", "host_port": None, "container_port": 80, "protocol": "udp"}],
            ),
        ]
    )
    text = export_node(topics, "n1")
    assert 'restart: "no"' in text  # PyYAML (compose) would read a bare no as false
    doc = load(text)
    assert doc["services"]["web"]["scale"] == 2 and doc["services"]["web"]["command"] == [
        "sh",
        "-c",
        "echo $$HOME",
    ]
    assert doc["services"]["web"]["network_mode"] == "bridge"  # no networks: Docker's default bridge
    assert doc["services"]["job"]["labels"] == {"cost": "$$5"}
    assert doc["services"]["job"]["ports"] == ["127.0.0.1::80/udp"]


def test_two_environments_sharing_a_name_keep_their_host_name_as_an_alias() -> None:
    net = {"networks": ["a.back"]}
    topics = dict(
        [container_payload("a", "db", 0, **net), container_payload("b", "db", 0, networks=["b.back"])]
    )
    for env in ("a", "b"):
        topics[Topics().desired_item("n1", "networks", f"{env}.back")] = {
            "kind": "network", "name": f"{env}.back", "environment": env, "network": "back", "driver": "bridge",
            "internal": False, "subnet": None, "labels": {}, "digest": "sha256:" + "1" * 64, "commit": "c" * 40,
        }  # fmt: skip
    doc = load(export_node(topics, "n1"))
    assert set(doc["services"]) == {"a-db", "b-db"} and set(doc["networks"]) == {"a-back", "b-back"}
    assert doc["services"]["a-db"]["networks"] == {"a-back": {"aliases": ["db"]}}


def test_other_nodes_cleared_and_unreadable_payloads_are_left_out() -> None:
    topic, payload = container_payload("a", "web", 0)
    other = topic.replace("/n1/", "/n2/")
    desired = {topic: payload, other: payload, topic.replace("web.0", "gone.0"): "", "not/a/topic": {}}
    doc = load(export_node(desired, "n1"))
    assert list(doc["services"]) == ["web"]
    assert load(export_node({}, "n9"))["services"] == {}


def test_named_volumes_are_declared_with_their_docker_name() -> None:
    topics = dict(
        [container_payload("a", "db", 0, volumes=["pgdata:/var/lib/postgresql/data", "/srv/x:/x:ro"])]
    )
    doc = load(export_node(topics, "n1"))
    assert doc["volumes"] == {"pgdata": {"name": "pgdata"}}


def test_the_agents_runtime_env_is_exported_and_dropped_again_on_import() -> None:
    from phrame.compose import import_compose

    topics = dict(
        [
            container_payload("a", "web", 0, env={"MODE": "x"}),
            container_payload("a", "job", 0),
            container_payload("a", "job", 1),
        ]
    )
    doc = load(export_node(topics, "n1"))
    web, job = doc["services"]["web"]["environment"], doc["services"]["job"]["environment"]
    assert web == {
        "MODE": "x", "PHRAME_NODE": "n1", "PHRAME_ENVIRONMENT": "a", "PHRAME_SERVICE": "web",
        "PHRAME_REPLICA": "0", "PHRAME_COMMIT": "c" * 40,
    }  # fmt: skip
    assert "PHRAME_REPLICA" not in job and job["PHRAME_SERVICE"] == "job"  # scale: one env for all
    again = import_compose(export_node(topics, "n1"), env="a", node="n1")
    assert "PHRAME_" not in again.files["environments/a/services/web.yaml"] and again.unsupported == []
    plain = import_compose(
        "services:\n  w:\n    image: x\n    environment: {PHRAME_NODE: n1}\n", env="a", node="n1"
    )
    assert [(u.service, u.key) for u in plain.unsupported] == [("w", "environment.PHRAME_NODE")]
