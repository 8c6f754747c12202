"""An export runs the same containers as the agent: one compose file imported, rendered,
run by ``phrame node-agent --once`` and, exported, by ``docker-compose up``; the two
containers of each service are compared field by field as Docker reports them."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import docker
import pytest

from phrame.compose import export_node, import_compose
from tests.support.agent_support import OPEN_POLICY, AgentEnv
from tests.support.compose_cli import compose, remove_project
from tests.support.compose_repo import new_repo, topics, write
from tests.support.docker import TEST_LABEL
from tests.support.services import require_binary

APP = """
services:
  db:
    image: {image}
    command: ["sleep", "600"]
    healthcheck:
      test: ["CMD-SHELL", "test -n \\"$$HOSTNAME\\""]
      interval: 1s
      retries: 5
    networks: [back]
    stop_signal: SIGKILL
    restart: unless-stopped
  web:
    image: {image}
    entrypoint: ["sh", "-c"]
    command: ["echo $$GREETING > /tmp/x && exec sleep 600"]
    environment:
      GREETING: ${{GREETING}}
      MODE: "on"
    ports:
      - "127.0.0.1::8080"
    volumes:
      - {volume}:/data
      - /etc/hostname:/host-name:ro
    networks: [back, front]
    depends_on:
      db:
        condition: service_healthy
    stop_signal: SIGINT
    stop_grace_period: 2s
    user: "1000:1000"
    working_dir: /tmp
    hostname: web-host
    extra_hosts: ["db.local:10.0.0.5"]
    ulimits:
      nofile: {{soft: 1024, hard: 2048}}
    logging:
      driver: json-file
      options: {{max-size: 1m}}
    mem_limit: 64m
    cpus: 0.5
    restart: on-failure
    labels:
      com.example.tier: web
networks:
  back:
  front:
"""


def _view(c: Any) -> dict[str, Any]:
    """What makes a container the same container, as Docker reports it."""
    cfg, host = c.attrs["Config"], c.attrs["HostConfig"]
    labels = {
        k: v
        for k, v in (cfg.get("Labels") or {}).items()
        if not k.startswith(("io.phrame", "com.docker.compose"))
    }
    mounts = sorted(
        (m["Type"], m.get("Name") or m["Source"], m["Destination"], m["RW"]) for m in c.attrs["Mounts"]
    )
    ports = {
        p: [(b["HostIp"], b["HostPort"] or "") for b in bs]
        for p, bs in (host.get("PortBindings") or {}).items()
    }
    nets = sorted(n.split("_", 1)[-1].split(".", 1)[-1] for n in c.attrs["NetworkSettings"]["Networks"])
    return {
        "image": cfg["Image"], "cmd": cfg["Cmd"], "entrypoint": cfg["Entrypoint"], "env": sorted(cfg["Env"]),
        "healthcheck": cfg.get("Healthcheck"), "stop_signal": cfg.get("StopSignal"), "stop_timeout": cfg.get("StopTimeout"),
        "user": cfg["User"], "working_dir": cfg["WorkingDir"], "labels": labels, "mounts": mounts, "ports": ports,
        "restart": host["RestartPolicy"]["Name"], "memory": host["Memory"], "nano_cpus": host["NanoCpus"],
        "extra_hosts": sorted(host.get("ExtraHosts") or []), "ulimits": host.get("Ulimits"),
        "log": host["LogConfig"], "networks": nets,
        "hostname": cfg["Hostname"] if cfg["Hostname"] == "web-host" else "(docker's)",
    }  # fmt: skip


@pytest.mark.slow
def test_the_agent_and_docker_compose_run_the_same_containers(
    tmp_path: Path, docker_client: docker.DockerClient, busybox_image: str, docker_cleanup: str
) -> None:
    binary = require_binary("docker-compose", "docker-compose")
    env = AgentEnv(docker_client, busybox_image, docker_cleanup)
    project, volume = f"phrame-same-{env.env}", f"phrame-same-{env.env}-data"
    result = import_compose(APP.format(image=busybox_image, volume=volume), env=env.env, node=env.node)
    repo = write(new_repo(tmp_path / "repo", env.node), result)
    desired = topics(repo)
    exported = export_node(desired, env.node)
    # the agent's copy carries the test label, so the session cleanup finds what it made
    for topic, payload in desired.items():
        if "/desired/nodes/" in topic and payload.get("kind") in ("container", "network"):
            payload["labels"] = {**payload["labels"], TEST_LABEL: docker_cleanup}
    (tmp_path / "desired.json").write_text(json.dumps(desired))
    secrets = tmp_path / "secrets"
    secrets.mkdir(mode=0o700)
    (secrets / "GREETING").write_text("hello\n")
    policy = tmp_path / "hostname-policy.yaml"  # the app reads the host's name: a node that allows it
    policy.write_text(OPEN_POLICY + "bind_mounts: {allow: [/etc/hostname]}\n")
    agent = subprocess.run(
        [sys.executable, "-m", "phrame", "node-agent", "--once", "--json", "--desired", str(tmp_path / "desired.json")],
        env=env.process_env(str(tmp_path / "state"), PHRAME_SECRETS_DIR=str(secrets), PHRAME_POLICY_FILE=str(policy)),
        capture_output=True, text=True, timeout=180,
    )  # fmt: skip
    assert agent.returncode == 0, agent.stdout + agent.stderr
    (tmp_path / "docker-compose.yml").write_text(exported, "utf-8")
    try:
        up = compose(binary, tmp_path, "up", "-d", env={"COMPOSE_PROJECT_NAME": project, "GREETING": "hello"})
        assert up.returncode == 0, up.stderr
        ours = {c.labels["io.phrame.service"]: c for c in env.managed()}
        theirs = {
            c.labels["com.docker.compose.service"]: c
            for c in docker_client.containers.list(
                all=True, filters={"label": f"com.docker.compose.project={project}"}
            )
        }
        assert set(ours) == set(theirs) == {"db", "web"}
        for name in ("db", "web"):
            assert _view(theirs[name]) == _view(ours[name]), name
        web = _view(ours["web"])
        assert web["stop_signal"] == "SIGINT" and web["stop_timeout"] == 2 and "GREETING=hello" in web["env"]
        assert web["ports"] == {"8080/tcp": [("127.0.0.1", "")]}
    finally:
        for c in env.managed():  # first: the agent's web holds the named volume too
            c.remove(force=True)
        down_env = {"COMPOSE_PROJECT_NAME": project, "GREETING": "x"}
        compose(binary, tmp_path, "down", "-v", "--timeout", "1", env=down_env)
        remove_project(docker_client, project, volume)


pytestmark = pytest.mark.docker
