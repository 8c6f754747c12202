"""The container service fields (stop signal and grace, user, working dir, host name,
extra hosts, ulimits, logging) carried both ways between compose and phrame."""

from __future__ import annotations

from pathlib import Path

from ruamel.yaml import YAML

from phrame.compose import export_node, import_compose
from tests.support.compose_repo import imported, node_topics, topics

COMPOSE = """
services:
  api:
    image: registry.test/api:1.0
    stop_signal: SIGINT
    stop_grace_period: 1m30s
    user: "1000:1000"
    working_dir: /app
    hostname: api-host
    extra_hosts:
      - "db.local:10.0.0.5"
      - "gw=host-gateway"
    ulimits:
      nproc: 512
      nofile: {soft: 1024, hard: 2048}
    logging:
      driver: json-file
      options:
        max-size: "10m"
        max-file: "3"
"""


def _service(text: str) -> dict:
    return YAML(typ="safe").load(text)


def test_import_maps_every_new_field_and_reports_none() -> None:
    result = import_compose(COMPOSE, env="demo", node="n1")
    spec = _service(result.files["environments/demo/services/api.yaml"])
    assert result.unsupported == []
    assert spec["stop_signal"] == "SIGINT" and spec["stop_grace_period"] == "1m30s"
    assert spec["user"] == "1000:1000" and spec["working_dir"] == "/app" and spec["hostname"] == "api-host"
    assert spec["extra_hosts"] == {"db.local": "10.0.0.5", "gw": "host-gateway"}
    assert spec["ulimits"] == {"nproc": 512, "nofile": {"soft": 1024, "hard": 2048}}
    assert spec["logging"] == {"driver": "json-file", "options": {"max-size": "10m", "max-file": "3"}}


def test_a_numeric_stop_signal_is_a_number() -> None:
    result = import_compose("services:\n  a:\n    image: x\n    stop_signal: '9'\n", env="demo", node="n1")
    assert _service(result.files["environments/demo/services/a.yaml"])["stop_signal"] == 9


def test_export_writes_them_and_a_reimport_renders_the_same(tmp_path: Path) -> None:
    repo, _ = imported(tmp_path / "a", COMPOSE)
    first = topics(repo)
    text = export_node(first, "n1")
    service = _service(text)["services"]["api"]
    assert service["stop_signal"] == "SIGINT" and service["stop_grace_period"] == "1m30s"
    assert service["ulimits"]["nproc"] == {"soft": 512, "hard": 512}
    assert service["logging"]["options"]["max-file"] == "3"
    again, result = imported(tmp_path / "b", text)
    assert result.unsupported == []
    assert node_topics(topics(again), "n1") == node_topics(first, "n1")
