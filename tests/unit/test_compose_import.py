"""``import_compose``: compose services, networks and volumes → phrame-config files, with
what has no equivalent listed, and the importer's environment never read."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml import YAML

from phrame.compose import ComposeError, import_compose
from tests.support.compose_repo import COMPOSE_FIXTURES, imported, problems

FIXTURES = sorted(p.stem for p in COMPOSE_FIXTURES.glob("*.yml"))


def load(text: str) -> Any:
    return YAML(typ="safe").load(text)


def service(result: Any, name: str, env: str = "demo") -> dict[str, Any]:
    out: dict[str, Any] = load(result.files[f"environments/{env}/services/{name}.yaml"])
    return out


def reasons(result: Any) -> dict[tuple[str, str], str]:
    return {(u.service, u.key): u.reason for u in result.unsupported}


@pytest.mark.parametrize("name", FIXTURES)
def test_every_public_sample_imports_to_a_valid_repo(tmp_path: Path, name: str) -> None:
    text = (COMPOSE_FIXTURES / f"{name}.yml").read_text("utf-8")
    repo, result = imported(tmp_path, text)
    assert [p.format() for p in problems(repo)] == []
    assert any(f.startswith("environments/demo/services/") for f in result.files)


def test_flask_redis_default_network_and_build_only_service() -> None:
    result = import_compose((COMPOSE_FIXTURES / "flask-redis.yml").read_text(), env="demo", node="n1")
    redis = service(result, "redis")
    # compose's project network, where services find each other by name
    assert redis["networks"] == ["default"] and "environments/demo/networks/default.yaml" in result.files
    assert redis["placement"] == {"node": "n1"} and redis["restart"] == "no"
    assert redis["ports"] == ["6379:6379"]
    assert "environments/demo/services/web.yaml" not in result.files
    assert "build" in reasons(result)[("web", "image")]


def test_nginx_flask_mysql_keeps_the_healthcheck_and_lists_what_it_drops() -> None:
    result = import_compose((COMPOSE_FIXTURES / "nginx-flask-mysql.yml").read_text(), env="demo", node="n1")
    db = service(result, "db")
    # $$ is compose's literal $: phrame has no interpolation, so it is one $ in the repo
    assert db["healthcheck"]["test"][1].startswith('mysqladmin ping -h 127.0.0.1 --password="$(cat ')
    assert db["healthcheck"]["start_period"] == "30s" and db["networks"] == ["backnet"]
    assert db["logging"]["options"]["max-size"] == "10m"
    found = reasons(result)
    assert {("db", "secrets"), ("db", "expose"), ("", "secrets")} <= set(found)
    assert {("backend", "image"), ("proxy", "image")} <= set(found)


def test_swarm_deploy_settings_become_replicas_and_restart() -> None:
    result = import_compose((COMPOSE_FIXTURES / "voting-app-stack.yml").read_text(), env="demo", node=None)
    redis, worker = service(result, "redis"), service(result, "worker")
    assert redis["replicas"] == 2 and redis["restart"] == "on-failure" and "placement" not in redis
    assert worker["networks"] == ["frontend", "backend"]
    found = reasons(result)
    assert "constraints" in found[("db", "deploy.placement")]
    assert ("worker", "deploy.restart_policy.max_attempts") in found
    assert service(result, "visualizer")["stop_grace_period"] == "1m30s"


def test_replicas_pinned_to_one_node_cannot_share_a_host_port() -> None:
    result = import_compose((COMPOSE_FIXTURES / "voting-app-stack.yml").read_text(), env="demo", node="n1")
    assert service(result, "vote")["replicas"] == 1
    assert "5000:80" in reasons(result)[("vote", "deploy.replicas")]
    assert service(result, "redis")["replicas"] == 2  # "6379": Docker picks a host port per replica


def test_mastodon_env_file_internal_network_and_relative_volumes() -> None:
    result = import_compose((COMPOSE_FIXTURES / "mastodon.yml").read_text(), env="demo", node="n1")
    web = service(result, "web")
    assert web["ports"] == ["127.0.0.1:3000:3000"]
    assert web["networks"] == ["external-network", "internal-network"]
    assert load(result.files["environments/demo/networks/internal-network.yaml"])["internal"] is True
    found = reasons(result)
    assert "env_file" in dict(((k, v) for (s, k), v in found.items() if s == "web"))
    assert "relative" in found[("web", "volumes[0]")] and "volumes" not in web


def test_variables_take_their_default_or_become_secret_files(monkeypatch: pytest.MonkeyPatch) -> None:
    # set in the importer's environment: must not end up in the repo
    monkeypatch.setenv("DB_PASSWORD", "hunter2")
    monkeypatch.setenv("TAG", "from-shell")
    text = """
services:
  db:
    image: "postgres:${TAG:-16}"
    command: ["postgres", "-c", "shared_buffers=${BUFFERS}"]
    environment:
      POSTGRES_PASSWORD: ${DB_PASSWORD}
      PGDATA: "$${HOME}/data"
      URL: "postgres://u:${DB_PASSWORD}@db/x"
      FROM_SHELL:
"""
    result = import_compose(text, env="demo", node="n1")
    db = service(result, "db")
    assert "hunter2" not in str(result.files) and "from-shell" not in str(result.files)
    assert db["image"] == "postgres:16"
    assert db["env"]["POSTGRES_PASSWORD"] == {"file": "DB_PASSWORD"}
    assert db["env"]["FROM_SHELL"] == {"file": "FROM_SHELL"}
    assert db["env"]["PGDATA"] == "${HOME}/data"
    assert "URL" not in db["env"] and "command" not in db
    found = reasons(result)
    assert "default" in found[("db", "image")] and "BUFFERS" in found[("db", "command")]
    assert "PHRAME_SECRETS_DIR/DB_PASSWORD" in found[("db", "environment.POSTGRES_PASSWORD")]


def test_volumes_ports_labels_and_resources() -> None:
    text = """
services:
  app:
    image: app:1
    ports:
      - target: 80
        published: 8080
        host_ip: 127.0.0.1
      - "127.0.0.1:9000:9000/udp"
    volumes:
      - data:/data:ro,nocopy
      - /srv/conf:/etc/app:ro
      - /anonymous
      - type: bind
        source: /srv/logs
        target: /logs
        read_only: true
      - type: tmpfs
        target: /tmp
    labels:
      - "com.example.team=media"
      - "io.phrame.node=evil"
    mem_limit: 512m
    deploy:
      resources:
        limits: {cpus: "0.5"}
        reservations: {memory: 128M}
volumes:
  data:
    name: app-data
    driver: local
"""
    result = import_compose(text, env="demo", node="n1")
    app = service(result, "app")
    assert app["ports"] == ["127.0.0.1:8080:80", "127.0.0.1:9000:9000/udp"]
    assert app["volumes"] == ["app-data:/data:ro", "/srv/conf:/etc/app:ro", "/srv/logs:/logs:ro"]
    assert app["labels"] == {"com.example.team": "media"}
    assert app["resources"] == {"memory": "512Mi", "cpus": 0.5}
    found = reasons(result)
    assert "nocopy" in found[("app", "volumes[0]")] and "anonymous" in found[("app", "volumes[2]")]
    assert "tmpfs" in found[("app", "volumes[4]")] and ("app", "labels.io.phrame.node") in found
    assert ("app", "deploy.resources.reservations") in found and ("", "volumes.data.driver") in found


def test_names_are_made_phrame_names_and_references_follow() -> None:
    text = """
services:
  Redis_DB:
    image: redis
    networks: [Back_Net]
  web:
    image: web
    depends_on: [Redis_DB, builder]
    networks: [Back_Net]
  builder:
    build: .
networks:
  Back_Net:
    driver: weave
"""
    result = import_compose(text, env="demo", node="n1")
    assert service(result, "web")["depends_on"] == ["redis-db"]
    assert service(result, "redis-db")["networks"] == ["back-net"]
    assert load(result.files["environments/demo/networks/back-net.yaml"])["driver"] == "bridge"
    found = reasons(result)
    assert (
        "redis-db" in found[("Redis_DB", "name")] and "not imported" in found[("web", "depends_on.builder")]
    )
    assert "weave" in found[("", "networks.Back_Net.driver")]


@pytest.mark.parametrize(
    ("text", "line", "words"),
    [
        ("services:\n  a:\n    image: x\n    image: y\n", 4, "duplicate"),
        ("services:\n  a:\n\timage: x\n", 3, "tab"),
        ("services:\n  a: [unclosed\n", 3, "yaml-syntax"),
        ("version: '3'\nweb:\n  image: x\n", 1, "services"),
        ("services:\n  a: 5\n", 2, "not a mapping"),
        ("services:\n  a:\n    image: x\n    command: echo ${\n", 4, "interpolation"),
    ],
)
def test_an_unreadable_file_is_a_compose_error_with_its_line(text: str, line: int, words: str) -> None:
    with pytest.raises(ComposeError) as e:
        import_compose(text, env="demo", node="n1")
    assert e.value.line == line and words in str(e.value)


def test_bad_environment_or_node_names_are_refused() -> None:
    with pytest.raises(ValueError, match="environment name"):
        import_compose("services: {}\n", env="Prod_1", node=None)
    with pytest.raises(ValueError, match="node name"):
        import_compose("services: {}\n", env="prod", node="N1")


def test_the_same_file_gives_the_same_bytes() -> None:
    text = (COMPOSE_FIXTURES / "mastodon.yml").read_text()
    assert (
        import_compose(text, env="demo", node="n1").files == import_compose(text, env="demo", node="n1").files
    )


def test_reserved_labels_are_dropped_from_networks_too(tmp_path: Path) -> None:
    text = "services:\n  a:\n    image: x\n    networks: [back]\nnetworks:\n  back:\n    labels:\n      io.phrame.test: run-1\n      team: media\n"
    repo, result = imported(tmp_path, text)
    assert load(result.files["environments/demo/networks/back.yaml"])["labels"] == {"team": "media"}
    assert ("", "networks.back.labels.io.phrame.test") in reasons(result)
    assert problems(repo) == []


def test_a_service_whose_image_needs_a_variable_is_not_imported(tmp_path: Path) -> None:
    text = "services:\n  a:\n    image: registry.test/a:${TAG}\n  b:\n    image: b\n    depends_on: [a]\n"
    repo, result = imported(tmp_path, text)
    assert "environments/demo/services/a.yaml" not in result.files
    assert "TAG" in reasons(result)[("a", "image")] and "depends_on" not in service(result, "b")
    assert problems(repo) == []
