"""An agent on a host without a Docker daemon (``phrame dev`` on a machine without Docker):
it stays up, runs its ``kind: process`` items and reports its containers as errors."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support import agent_support as spec
from tests.support.agent_support import ActualWatcher, AgentProcess, open_policy_file
from tests.support.mosquitto import Mosquitto


@pytest.fixture
def node() -> str:
    return f"nodocker-{uuid.uuid4().hex[:8]}"


@pytest.fixture
def watcher(mosquitto: Mosquitto, node: str) -> Iterator[ActualWatcher]:
    w = ActualWatcher(mosquitto.url, node)
    yield w
    w.stop()


def test_without_a_daemon_processes_run_and_containers_are_errors(
    mosquitto: Mosquitto, watcher: ActualWatcher, node: str, tmp_path: Path
):
    work = tmp_path / "work"
    work.mkdir()
    ticker = spec.process(
        "e", "ticker", ["sh", "-c", "echo tick > ticker.txt; exec sleep 600"], workdir=str(work)
    )
    web = spec.container("e", "web", command=["sleep", "600"])
    watcher.publish(spec.topics_doc(node, [ticker, web]))
    env = {
        "PATH": "/usr/bin:/bin",
        "DOCKER_HOST": f"unix://{tmp_path}/no-docker.sock",  # nothing listens there
        "PHRAME_NODE_NAME": node,
        "PHRAME_STATE_DIR": str(tmp_path / "state"),
        "PHRAME_DESIRED_MQTT_URL": mosquitto.url,
        "PHRAME_HEARTBEAT_S": "0.5",
        "PHRAME_RESYNC_S": "1",
        "PHRAME_POLICY_FILE": open_policy_file(tmp_path),
    }
    agent = AgentProcess(env, str(tmp_path / "agent.log"))
    try:
        watcher.wait_for(
            lambda: (
                (watcher.status() or {}).get("state") == "online"
                and any("e.web.0" in e for e in (watcher.status() or {}).get("errors", []))
            ),
            timeout=20,
            what="an online status naming the container that cannot run",
        )
        assert agent.proc.poll() is None, agent.log()
        # the process was started in that pass; its first line lands a moment later
        ticker_file = work / "ticker.txt"
        watcher.wait_for(
            lambda: ticker_file.exists() and ticker_file.read_text() == "tick\n",
            timeout=20,
            what="the host process to write its file",
        )
        watcher.wait_for(
            lambda: (watcher.item("processes", "e.ticker.0") or {}).get("state") == "running",
            timeout=20,
            what="the process reported running",
        )
        errors = " ".join(watcher.status()["errors"])
        assert "Docker" in errors, errors
    finally:
        code = agent.terminate()
        for item in (tmp_path / "state" / "processes").glob("*/meta.json"):
            with contextlib.suppress(ProcessLookupError):  # the agent leaves processes running
                os.killpg(json.loads(item.read_text())["pid"], signal.SIGTERM)
    assert code == 0, agent.log()
