"""Rendered ``replaces`` handovers for the agent tests: a real config repo, rendered as
config-sync renders it, and a sampler that proves there is never a window with neither
the old container nor the new process. Used by test_agent_processes and test_agent_loop."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

import docker.errors
import psutil

from phrame.config_repo import load_directory, render, validate
from schemas import Topics
from tests.support.agent_support import AgentEnv

T = Topics()


def render_node(root: Path, env: AgentEnv, services: dict[str, dict[str, Any]]) -> dict[str, bytes]:
    """Write a config repo holding ``services`` (all pinned to ``env.node``), validate and
    render it as config-sync does, and return the node's desired topics as published."""
    (root / "nodes").mkdir(parents=True)
    (root / "nodes" / f"{env.node}.yaml").write_text(json.dumps({"name": env.node}))
    env_dir = root / "environments" / env.env
    (env_dir / "services").mkdir(parents=True)
    (env_dir / "environment.yaml").write_text(json.dumps({"name": env.env}))
    for name, doc in services.items():
        doc = {"name": name, "placement": {"node": env.node}, **doc}
        if doc.get("kind", "container") == "container":  # io.phrame.* labels are the agent's
            doc.setdefault("image", env.image)  # own: its containers are cleaned up by node label
        (env_dir / "services" / f"{name}.yaml").write_text(json.dumps(doc))
    repo, read = load_directory(root)
    assert validate(repo, read) == []
    mine = T.desired_node(env.node) + "/"
    return {t: json.dumps(p).encode() for t, p in render(repo).topics().items() if t.startswith(mine)}


def handover_services(command: list[str]) -> dict[str, dict[str, Any]]:
    """A container service and the host process that replaces it (``replaces``)."""
    return {
        "legacy": {"command": ["sleep", "3600"]},
        "mon": {"kind": "process", "command": command, "replaces": "legacy"},
    }


class Presence:
    """Samples every 100 ms whether the old container runs and whether the process is up
    (read from its pid file: ``check()`` itself would count as a check)."""

    def __init__(self, env: AgentEnv, container: str, state_dir: Path) -> None:
        self.env, self.container, self.state_dir = env, container, state_dir
        self.samples: list[tuple[float, bool, bool | None]] = []  # (wall time, container, process)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll)

    def container_up(self) -> bool:
        try:
            return bool(self.env.get(self.container).status == "running")
        except docker.errors.NotFound:  # removed (between list and inspect, too)
            return False

    def process_up(self) -> bool | None:
        try:
            metas = (self.state_dir / "processes").glob("*/meta.json")
            pids = [json.loads(m.read_text())["pid"] for m in metas]
        except (OSError, ValueError):
            return None  # caught mid-write: this sample says nothing
        return any(_pid_alive(pid) for pid in pids if pid)

    def _poll(self) -> None:
        while not self._stop.is_set():
            self.samples.append((time.time(), self.container_up(), self.process_up()))
            self._stop.wait(0.1)

    def gaps(self) -> list[float]:
        """Times when neither was up, once one of them had come up."""
        first = next((i for i, (_t, c, p) in enumerate(self.samples) if c or p), len(self.samples))
        return [t for t, c, p in self.samples[first:] if not c and p is False]

    def __enter__(self) -> Presence:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def _pid_alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False
