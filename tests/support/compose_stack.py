"""``compose/docker-compose.yml`` started for one test: files, ``docker-compose`` calls, cleanup.

Used by ``tests/integration/test_compose_stack.py``. Each stack has its own compose project
name, node and environment names, free 127.0.0.1 ports and a bare config repository in the
test's tmp folder, made as the production guide makes them: ``scripts/config-repo-init`` (its
``safe.directory`` in a system git config of the test's own), ``scripts/compose-secrets``
and ``phrame broker-config``. :meth:`ComposeStack.down` removes exactly what it created: the compose
project (containers, network, volumes, by its project label) and the containers the agent
made for its node (by ``io.phrame.node``); never any other object on the shared daemon.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import uuid
from pathlib import Path
from typing import Any

import docker
import docker.errors
import git

from tests.support.docker import TEST_LABEL
from tests.support.services import free_port

ROOT = Path(__file__).resolve().parents[2]
COMPOSE_FILE = ROOT / "compose" / "docker-compose.yml"
REPO_IN_CONTAINER = "/srv/phrame-config.git"
SCRIPTS = ROOT / "scripts"


def run(argv: list[str], *, timeout: float, **kwargs: Any) -> subprocess.CompletedProcess[str]:
    """Run a command; a failure raises with its output (the test's message)."""
    done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False, **kwargs)
    if done.returncode != 0:
        raise AssertionError(f"{' '.join(argv)} exited {done.returncode}:\n{done.stdout}\n{done.stderr}")
    return done


class ComposeStack:
    """The production compose file plus a test override, as project ``phrame-t<random>``."""

    def __init__(self, root: Path, client: docker.DockerClient, *, label: str, compose: str) -> None:
        suffix = uuid.uuid4().hex[:8]
        self.client, self.label, self.compose_bin = client, label, compose
        self.project = f"phrame-t{suffix}"
        self.node, self.env = f"cmp-{suffix}", f"cmp{suffix}"
        self.root = root / "stack"
        self.bare = self.root / "phrame-config.git"
        self.broker_dir = self.root / "mosquitto"
        self.mqtts_port, self.wss_port, self.sync_port = free_port(), free_port(), free_port()
        self.api_port = free_port()
        self.secrets = self.root / "secrets"
        # our git trusts the repository owned by the image's user as the host's would, through
        # the system config (scripts/config-repo-init), here a file of this test's own
        self.git_env = {**os.environ, "GIT_CONFIG_SYSTEM": str(self.root / "system-gitconfig")}

    @property
    def ca(self) -> Path:
        return self.broker_dir / "certs" / "ca.crt"

    def password(self, account: str) -> str:
        """An MQTT account's password as scripts/compose-secrets made it."""
        if account.startswith("node-"):
            return (self.secrets / "nodes" / account.removeprefix("node-")).read_text().strip()
        return (self.secrets / f"{account.replace('-', '_')}_mqtt_password").read_text().strip()

    @property
    def secret(self) -> str:
        return (self.secrets / "webhook_secret").read_text().strip()

    @property
    def api_token(self) -> str:
        return (self.secrets / "api_token").read_text().strip()

    # -- files
    def write_files(self, phrame: str) -> None:
        """The files of the production guide: the bare repository (config-repo-init), the
        secrets, certificates and passwd (compose-secrets), the broker config exactly as
        `phrame broker-config` writes it; then env and override."""
        self.root.mkdir(parents=True)
        self.root.chmod(0o755)
        run([str(SCRIPTS / "config-repo-init"), str(self.bare)], timeout=60, env=self.git_env)
        work = self.init_repo()
        run([str(SCRIPTS / "compose-secrets"), "--dir", str(self.root), "--agent", self.node], timeout=120)
        run([phrame, "broker-config", "--inventory", str(work), "--out", str(self.broker_dir)], timeout=60)
        (self.root / "node-secrets").mkdir()
        self.env_file.write_text(self.env_text())
        self.override_file.write_text(self.override_text())

    def init_repo(self) -> Path:
        work = self.root / "work"
        self.work = git.Repo.clone_from(str(self.bare), work, env=self.git_env)
        with self.work.config_writer() as cw:
            cw.set_value("user", "name", "Compose Test")
            cw.set_value("user", "email", "ops@example.test")
        files = {
            f"nodes/{self.node}.yaml": f"name: {self.node}\n",
            f"environments/{self.env}/environment.yaml": f"name: {self.env}\ntrack: main\nplacement: auto\n",
        }
        self.commit("inventory: one node, one empty environment", files)
        return work

    def commit(self, message: str, files: dict[str, str]) -> str:
        """Commit ``files`` and push them to the bare repo as a person would; returns the sha."""
        work = Path(str(self.work.working_tree_dir))
        for rel, text in files.items():
            (work / rel).parent.mkdir(parents=True, exist_ok=True)
            (work / rel).write_text(text)
        self.work.git.add(A=True)
        self.work.git.commit("-m", message)
        with self.work.git.custom_environment(GIT_CONFIG_SYSTEM=self.git_env["GIT_CONFIG_SYSTEM"]):
            self.work.git.push("origin", "HEAD:refs/heads/main")
        return str(self.work.head.commit.hexsha)

    @property
    def env_file(self) -> Path:
        return self.root / "test.env"

    @property
    def override_file(self) -> Path:
        return self.root / "docker-compose.test.yml"

    def env_text(self) -> str:
        settings = {
            "PHRAME_IMAGE": "phrame/phrame:local",
            "PHRAME_MOSQUITTO_IMAGE": "phrame/mosquitto:local",
            "PHRAME_MOSQUITTO_CONFIG": str(self.broker_dir),
            "PHRAME_MOSQUITTO_CERTS": str(self.broker_dir / "certs"),
            "PHRAME_COMPOSE_SECRETS": str(self.secrets),
            "PHRAME_NODE_SECRETS": str(self.root / "node-secrets"),
            "PHRAME_MQTTS_PORT": str(self.mqtts_port),
            "PHRAME_WSS_PORT": str(self.wss_port),
            "PHRAME_CONFIG_SYNC_PORT": str(self.sync_port),
            "PHRAME_TOPIC_API_PORT": str(self.api_port),
            "PHRAME_GIT_HOST": "local",
            "PHRAME_REPO_URL": REPO_IN_CONTAINER,
            "PHRAME_NODE_NAME": self.node,
            "PHRAME_DOCKER_GID": str(os.stat("/var/run/docker.sock").st_gid),
            "PHRAME_RESYNC_S": "5",
        }
        return "".join(f"{k}={v}\n" for k, v in settings.items())

    def override_text(self) -> str:
        labels = f"      {TEST_LABEL}: {self.label}\n"
        repo = f"      - {self.bare}:{REPO_IN_CONTAINER}\n"
        return (
            "services:\n"
            f"  mosquitto:\n    labels:\n{labels}"
            f"  config-sync:\n    volumes:\n{repo}    labels:\n{labels}"
            f"  placement:\n    volumes:\n{repo}    labels:\n{labels}"
            f"  node-agent:\n    labels:\n{labels}"
            f"  mirror-desired:\n    labels:\n{labels}"
            f"  mirror-actual:\n    labels:\n{labels}"
            f"  topic-api:\n    labels:\n{labels}"
        )

    # -- docker-compose
    def compose(self, *args: str, timeout: float = 180) -> subprocess.CompletedProcess[str]:
        argv = [self.compose_bin, "-p", self.project, "-f", str(COMPOSE_FILE), "-f", str(self.override_file)]
        return run([*argv, "--env-file", str(self.env_file), "--profile", "agent", *args], timeout=timeout)

    def container(self, service: str) -> Any:
        found = self.client.containers.list(
            all=True,
            filters={
                "label": [
                    f"com.docker.compose.project={self.project}",
                    f"com.docker.compose.service={service}",
                ]
            },
        )
        assert found, f"no container for compose service {service} in project {self.project}"
        return found[0]

    def health(self, service: str) -> str:
        state = self.container(service).attrs["State"]
        return str((state.get("Health") or {}).get("Status", state["Status"]))

    def logs(self) -> str:
        with contextlib.suppress(AssertionError, subprocess.TimeoutExpired):
            return self.compose("logs", "--no-color", "--tail", "60", timeout=60).stdout
        return "<no logs>"

    def leftovers(self) -> list[str]:
        """Objects of this stack still on the daemon (none after :meth:`down`)."""
        by_project = {"label": f"com.docker.compose.project={self.project}"}
        by_node = {"label": f"io.phrame.node={self.node}"}
        found = [
            f"container/{c.name}"
            for f in (by_project, by_node)
            for c in self.client.containers.list(all=True, filters=f)
        ]
        found += [
            f"network/{n.name}" for f in (by_project, by_node) for n in self.client.networks.list(filters=f)
        ]
        return found + [f"volume/{v.name}" for v in self.client.volumes.list(filters=by_project)]

    def down(self) -> list[str]:
        """Remove what this stack created, even after a failure; returns what was left to remove."""
        with contextlib.suppress(AssertionError, subprocess.TimeoutExpired):
            self.compose("down", "--volumes", "--remove-orphans", "--timeout", "5", timeout=120)
        left: list[str] = []
        by_project = {"label": f"com.docker.compose.project={self.project}"}
        by_node = {"label": [f"io.phrame.node={self.node}", "io.phrame.managed=true"]}
        for filters in (by_node, by_project):
            for c in self.client.containers.list(all=True, filters=filters):
                with contextlib.suppress(docker.errors.NotFound):
                    c.remove(force=True, v=True)
                    left.append(f"container/{c.name}")
        for kind, filters in (
            (self.client.networks, by_node),
            (self.client.networks, by_project),
            (self.client.volumes, by_project),
        ):
            for obj in kind.list(filters=filters):
                with contextlib.suppress(docker.errors.NotFound, docker.errors.APIError):
                    obj.remove()
                    left.append(f"{type(obj).__name__.lower()}/{obj.name}")
        return left
