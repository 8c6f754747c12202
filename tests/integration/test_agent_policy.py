"""The node policy, enforced by the real agent on real dockerd and mosquitto.

A commit cannot make an agent mount /, the Docker socket or /etc, nor run a process as
root, unless the node's own policy file allows it: the item is refused with a clear error
on its report and the node status, and nothing is created. A bad policy file stops the
agent at start.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from schemas.node_policy import PROTECTED
from tests.support import agent_support as spec
from tests.support.agent_support import ActualWatcher, AgentEnv, AgentProcess

# what a commit asks for: each is worth root on the host
DANGEROUS = {
    "rootfs": ["/:/host:ro"],
    "socket": ["/var/run/docker.sock:/var/run/docker.sock:ro"],
    "etc": ["/etc/shadow:/shadow:ro"],
}


def items(env: AgentEnv) -> list[dict[str, Any]]:
    boxes = [env.container(name, volumes=volumes) for name, volumes in DANGEROUS.items()]
    plain = env.container("plain")  # asks nothing of the host: runs under any policy
    as_root = spec.process(env.env, "as-root", ["sleep", "600"], user="root")
    return [*boxes, plain, as_root]


def start_agent(env: AgentEnv, tmp_path: Path, url: str, policy: str, tag: str) -> AgentProcess:
    path = tmp_path / f"policy-{tag}.yaml"
    path.write_text(policy)
    agent_env = env.process_env(str(tmp_path / "state"), PHRAME_DESIRED_MQTT_URL=url)
    agent_env["PHRAME_POLICY_FILE"] = str(path)
    return AgentProcess(agent_env, str(tmp_path / f"agent-{tag}.log"))


def _stop_process(watcher: ActualWatcher, item: str) -> None:
    report = watcher.item("processes", item) or {}
    if report.get("pid"):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(int(report["pid"]), signal.SIGKILL)  # its own session: the agent leaves it running


@pytest.mark.slow
def test_a_commit_cannot_lift_the_node_policy_but_the_node_can(
    mosquitto, env: AgentEnv, watcher: ActualWatcher, tmp_path: Path
):
    specs = items(env)
    names = {s["service"]: s["name"] for s in specs}
    watcher.publish(spec.topics_doc(env.node, specs))

    # the node's policy allows host processes, but not as root, and no bind mounts
    agent = start_agent(env, tmp_path, mosquitto.url, "processes: {allowed: true}\n", "strict")
    try:
        watcher.wait_for(
            lambda: (
                (watcher.item("containers", names["plain"]) or {}).get("state") == "running"
                and len([e for e in (watcher.status() or {}).get("errors", []) if e.startswith("policy: ")])
                == 4
            ),
            what="the plain container running and four items refused",
        )
        status = watcher.status()
        assert status["converged"] is False
        assert status["policy"]["file"] == str(tmp_path / "policy-strict.yaml")
        assert status["policy"]["processes"] == {"allowed": True, "users": None, "agent_user": "root"}
        for name in DANGEROUS:
            report = watcher.item("containers", names[name])
            assert report["state"] == "missing", report
            assert report["error"].startswith(f"policy: {names[name]}: bind mount of "), report
            assert (
                f"not allowed on {env.node} by policy file {tmp_path}/policy-strict.yaml" in report["error"]
            )
            assert not env.exists(names[name])  # never created
        rootfs = watcher.item("containers", names["rootfs"])["error"]
        assert "bind mount of / (volumes[0] '/:/host:ro'): / is under no allowed root" in rootfs
        proc = watcher.item("processes", names["as-root"])
        assert proc["state"] == "missing" and "process as root (user)" in proc["error"], proc
        assert not (tmp_path / "state" / "processes" / names["as-root"]).exists()  # never started
    finally:
        assert agent.terminate() == 0, agent.log()

    # the same node, its policy now allowing each of them: the same commit runs. Mounting /
    # takes every protected path listed, the agent's own folders and policy file among them
    own = [tmp_path / "state", Path("/etc/phrame/secrets"), tmp_path / "policy-open.yaml"]
    allowed = "\n".join(
        [
            "bind_mounts:",
            f"  allow: [{', '.join([*PROTECTED, *map(str, own)])}]",
            "processes: {allowed: true, users: [root]}",
            "",
        ]
    )
    agent = start_agent(env, tmp_path, mosquitto.url, allowed, "open")
    try:
        watcher.wait_for(
            lambda: (
                (watcher.status() or {}).get("converged") is True
                and (watcher.status() or {}).get("policy", {}).get("processes", {}).get("users") == ["root"]
            ),
            what="the node converged under the allowing policy",
        )
        for name in DANGEROUS:
            assert env.get(names[name]).status == "running"
        assert watcher.item("processes", names["as-root"])["state"] == "running"
    finally:
        _stop_process(watcher, names["as-root"])
        assert agent.terminate() == 0, agent.log()


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("processes:\n  allowed: maybe\n", ":2:12: /processes/allowed: 'maybe' is not of type 'boolean'"),
        (
            "bind_mount:\n  allow: [/srv]\n",
            "Additional properties are not allowed ('bind_mount' was unexpected)",
        ),
        ("bind_mounts:\n  allow: [srv]\n", ":2:11: /bind_mounts/allow/0: 'srv' does not match '^/'"),
        ("bind_mounts:\n  protected: []\n", ":2:3: bind_mounts.protected is set by the agent, not the file"),
        ("ports: [\n", "policy.yaml:2:1: "),
    ],
)
def test_a_bad_policy_file_stops_the_agent_at_start(tmp_path: Path, text: str, says: str):
    path = tmp_path / "policy.yaml"
    path.write_text(text)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PHRAME_")}
    env |= {
        "PHRAME_POLICY_FILE": str(path),
        "PHRAME_NODE_NAME": "n1",
        "PHRAME_STATE_DIR": str(tmp_path / "s"),
    }
    done = subprocess.run(
        [sys.executable, "-m", "phrame", "node-agent"], env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith(f"phrame node-agent: policy file {path}"), done.stderr
    assert says in done.stderr, done.stderr


def test_a_policy_file_named_but_absent_stops_the_agent(tmp_path: Path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("PHRAME_")}
    env |= {"PHRAME_POLICY_FILE": str(tmp_path / "nope.yaml"), "PHRAME_NODE_NAME": "n1"}
    done = subprocess.run(
        [sys.executable, "-m", "phrame", "node-agent"], env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 2
    assert f"PHRAME_POLICY_FILE={tmp_path}/nope.yaml: no such file" in done.stderr
