"""Exported compose files against the real docker-compose: every export of the public
sample shapes (and of the studio fixture's nodes) passes ``docker-compose config``, and one
export of busybox services actually runs under ``docker-compose up`` on the real daemon."""

from __future__ import annotations

import http.client
import urllib.request
from pathlib import Path

import docker
import pytest
from ruamel.yaml import YAML

from phrame.compose import export_node, import_compose
from tests.support.compose_cli import compose, remove_project
from tests.support.compose_repo import COMPOSE_FIXTURES, imported, new_repo, studio_topics, topics, write
from tests.support.services import free_port, require_binary
from tests.support.waiting import wait_for

FIXTURES = sorted(p.stem for p in COMPOSE_FIXTURES.glob("*.yml"))


@pytest.mark.parametrize("name", FIXTURES)
def test_every_export_of_a_public_sample_passes_docker_compose_config(tmp_path: Path, name: str) -> None:
    binary = require_binary("docker-compose", "docker-compose")
    repo, _ = imported(tmp_path / "repo", (COMPOSE_FIXTURES / f"{name}.yml").read_text("utf-8"))
    (tmp_path / "docker-compose.yml").write_text(export_node(topics(repo), "n1"), "utf-8")
    done = compose(binary, tmp_path, "config", "-q")
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize("node", ["core-01", "edge-01", "edge-02", "edge-03"])
def test_studio_exports_pass_config_and_need_their_secrets(tmp_path: Path, node: str) -> None:
    binary = require_binary("docker-compose", "docker-compose")
    text = export_node(studio_topics(), node)
    (tmp_path / "docker-compose.yml").write_text(text, "utf-8")
    secrets = (YAML(typ="safe").load(text).get("x-phrame") or {}).get("secrets") or {}
    done = compose(binary, tmp_path, "config", "-q", env=dict.fromkeys(secrets, "value"))
    assert done.returncode == 0, done.stderr
    if secrets:  # a secret left unset stops compose instead of starting with an empty value
        missing = compose(binary, tmp_path, "config", "-q")
        assert missing.returncode != 0 and next(iter(secrets)) in missing.stderr


APP = """
services:
  db:
    image: {image}
    command: ["sleep", "600"]
    healthcheck:
      test: ["CMD", "true"]
      interval: 1s
    networks: [back]
    stop_signal: SIGKILL
  web:
    image: {image}
    # $$ is compose's literal $: through phrame and back it must stay the shell's
    command: ["sh", "-c", "mkdir -p /www && echo \\"hello $$GREETING\\" > /www/index.html && exec httpd -f -p 8080 -h /www"]
    environment:
      GREETING: ${{GREETING}}
    ports:
      - "127.0.0.1:{port}:8080"
    volumes:
      - {volume}:/data
    networks: [back]
    depends_on:
      db:
        condition: service_healthy
    stop_grace_period: 1s
    labels:
      com.example.shop: web
networks:
  back:
"""


def _get(port: int) -> str:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=1) as r:
            return str(r.read().decode())
    except (OSError, http.client.HTTPException) as e:  # cut short while replaced
        return f"not yet: {e!r}"


@pytest.mark.slow
def test_an_exported_file_runs_under_docker_compose_up(
    tmp_path: Path, docker_client: docker.DockerClient, busybox_image: str, test_label: str
) -> None:
    binary = require_binary("docker-compose", "docker-compose")
    port, project = free_port(), f"phrame-compose-{test_label}".lower()
    volume = f"{project}-data"
    text = APP.format(image=busybox_image, port=port, volume=volume)
    result = import_compose(text, env="shop", node="n1")
    # ${GREETING} is compose's environment: a secret file reference in the repo, and a
    # required variable again in the export
    assert "PHRAME_SECRETS_DIR/GREETING" in str(result.unsupported)
    repo = write(new_repo(tmp_path / "repo", "n1"), result)
    exported = export_node(topics(repo), "n1")
    (tmp_path / "docker-compose.yml").write_text(exported, "utf-8")
    env = {"COMPOSE_PROJECT_NAME": project, "GREETING": "from compose"}
    try:
        up = compose(binary, tmp_path, "up", "-d", env=env)
        assert up.returncode == 0, up.stderr
        page = wait_for(lambda: "hello" in (body := _get(port)) and body, f"web on 127.0.0.1:{port}", 60)
        assert page.strip() == "hello from compose"
        running = docker_client.containers.list(filters={"label": f"com.docker.compose.project={project}"})
        assert {c.labels["com.docker.compose.service"] for c in running} == {"db", "web"}
        assert not any("io.phrame.managed" in c.labels for c in running)  # no agent takes them
        web = next(c for c in running if c.labels["com.docker.compose.service"] == "web")
        assert web.attrs["HostConfig"]["PortBindings"]["8080/tcp"] == [
            {"HostIp": "127.0.0.1", "HostPort": str(port)}
        ]
        assert web.attrs["Config"]["StopTimeout"] == 1 and web.labels["com.example.shop"] == "web"
        assert docker_client.volumes.get(volume).name == volume  # phrame's name, no project prefix
    finally:
        down = compose(binary, tmp_path, "down", "-v", "--timeout", "1", env=env)
        remove_project(docker_client, project, volume)
    assert down.returncode == 0, down.stderr
