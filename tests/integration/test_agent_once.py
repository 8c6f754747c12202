"""``phrame node-agent --once --desired FILE`` as a subprocess against the real daemon."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from schemas import Topics
from tests.support import agent_support as spec
from tests.support.agent_support import ActualWatcher, AgentEnv
from tests.support.waiting import wait_for

PHRAME = [sys.executable, "-m", "phrame"]


def write(tmp_path: Path, doc: dict[str, Any]) -> str:
    path = tmp_path / "desired.json"
    path.write_text(json.dumps(doc))
    return str(path)


def once(env: AgentEnv, tmp_path: Path, path: str, **extra: str) -> tuple[int, dict[str, Any]]:
    proc = subprocess.run(
        [*PHRAME, "node-agent", "--once", "--json", "--desired", path],
        env=env.process_env(str(tmp_path / "state"), **extra),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.stdout, proc.stderr
    return proc.returncode, json.loads(proc.stdout)


@pytest.mark.slow
def test_once_converges_then_reports_an_empty_plan(env: AgentEnv, tmp_path: Path):
    specs = [env.network("n"), env.container("web", networks=[f"{env.env}.n"])]
    path = write(tmp_path, spec.topics_doc(env.node, specs))
    code, report = once(env, tmp_path, path)
    assert code == 0 and report["converged"] and report["manifest"] == "complete"
    assert [r["op"] for r in report["results"]] == ["create_network", "pull_image", "create"]
    code, report = once(env, tmp_path, path)
    assert code == 0 and report["plan"] == []


def test_invalid_payloads_are_reported_and_ignored(env: AgentEnv, tmp_path: Path):
    good = env.container("good")
    bad = env.container("bad")
    doc = spec.topics_doc(env.node, [good, bad], with_manifest=False)
    bad_topic = Topics().desired_item(env.node, "containers", bad["name"])
    doc[bad_topic] = {**bad, "replica": "zero"}  # schema violation
    other = Topics().desired_item("someone-else", "containers", f"{env.env}.x.0")
    doc[other] = env.container("x")  # another node's topic: not ours, not acted on
    code, report = once(env, tmp_path, write(tmp_path, doc))
    assert code == 1
    assert list(report["invalid_payloads"]) == [bad_topic]
    assert "replica" in report["invalid_payloads"][bad_topic]
    assert [c.name for c in env.managed()] == [good["name"]]


@pytest.mark.slow
def test_sigkill_mid_converge_then_the_next_run_finishes_without_duplicates(env: AgentEnv, tmp_path: Path):
    specs = [env.container(f"s{i}") for i in range(10)]
    path = write(tmp_path, spec.topics_doc(env.node, specs))
    proc = subprocess.Popen(
        [*PHRAME, "node-agent", "--once", "--desired", path],
        env=env.process_env(str(tmp_path / "state"), PHRAME_PARALLELISM="1"),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for(lambda: len(env.managed()) >= 3, "three containers made", 60, interval=0.05)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
    first = len(env.managed())
    assert 3 <= first < 10, "the kill should land in the middle of the converge"
    code, report = once(env, tmp_path, path)
    assert code == 0, report
    names = sorted(c.name for c in env.managed())
    assert names == sorted(s["name"] for s in specs)
    assert all(c.status == "running" for c in env.managed())


@pytest.mark.slow
def test_once_reads_the_desired_state_from_the_broker(env: AgentEnv, tmp_path: Path, mosquitto):
    web = env.container("web")
    publisher = ActualWatcher(mosquitto.url, env.node)
    try:
        publisher.publish(spec.topics_doc(env.node, [web]))
    finally:
        publisher.stop()
    proc = subprocess.run(
        [*PHRAME, "node-agent", "--once"],
        env=env.process_env(str(tmp_path / "state"), PHRAME_DESIRED_MQTT_URL=mosquitto.url),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"create {web['name']}" in proc.stdout and "manifest complete" in proc.stdout
    assert [c.name for c in env.managed()] == [web["name"]]
