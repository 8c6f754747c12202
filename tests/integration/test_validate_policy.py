"""``phrame validate --policy-from-broker``: a commit checked at review time against the node
policy each agent reports in its retained status (real mosquitto), with file:line."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from phrame.mqtt import MqttClient, MqttSettings
from schemas import check_payload
from schemas.node_policy import NodePolicy
from tests.support.compose_repo import new_repo

ROOT = Path(__file__).parents[2]
SERVICES = {
    "spy.yaml": "name: spy\nimage: busybox\nvolumes:\n  - /srv/data:/data\n  - /etc:/host-etc:ro\n"
    "placement:\n  node: n1\n",
    "tool.yaml": "name: tool\nkind: process\ncommand: [sleep, '600']\nuser: root\nplacement:\n  node: n1\n",
    "web.yaml": "name: web\nimage: busybox\nports: ['127.0.0.1:8080:80']\nplacement:\n  node: n2\n",
}


def repo(tmp_path: Path) -> Path:
    path = new_repo(tmp_path / "repo", "n1", "n2")
    env = path / "environments" / "lab"
    (env / "services").mkdir(parents=True)
    (env / "environment.yaml").write_text("name: lab\n")
    for name, text in SERVICES.items():
        (env / "services" / name).write_text(text)
    return path


def publish_statuses(url: str, policies: dict[str, NodePolicy | None]) -> None:
    client = MqttClient(MqttSettings(url=url), f"test-statuses-{os.getpid()}")
    client.start()
    try:
        batch = []
        for node, policy in policies.items():
            doc = {"state": "online", "agent": "0.1.0", "errors": []}
            if policy is not None:
                doc["policy"] = policy.to_doc()
            check_payload("actual-status", doc)
            batch.append((f"phrame/actual/nodes/{node}/status", json.dumps(doc).encode()))
        client.publish_batch(batch)
    finally:
        client.stop()


def validate(path: Path, url: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PHRAME_")}
    return subprocess.run(
        [sys.executable, "-m", "phrame", "validate", str(path), "--policy-from-broker", url],
        capture_output=True, text=True, cwd=ROOT, env=env, timeout=60,
    )  # fmt: skip


@pytest.mark.slow
def test_validate_flags_what_a_node_policy_refuses_at_its_line(mosquitto, tmp_path: Path):
    path = repo(tmp_path)
    strict = NodePolicy(allow=("/srv",), processes=True, file="/etc/phrame/policy.yaml", agent_user="phrame")
    publish_statuses(mosquitto.url, {"n1": strict, "n2": None})
    done = validate(path, mosquitto.url)
    assert done.returncode == 1, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert lines == [
        "environments/lab/services/spy.yaml:5:5: node-policy: lab.spy.0: bind mount of /etc "
        "(volumes[1] '/etc:/host-etc:ro'): /etc is under no allowed root (bind_mounts.allow: /srv); "
        "not allowed on node n1 by policy file /etc/phrame/policy.yaml",
        "environments/lab/services/tool.yaml:4:7: node-policy: lab.tool.0: process as root (user): list the "
        "user in processes.users to allow it; not allowed on node n1 by policy file /etc/phrame/policy.yaml",
    ], done.stdout
    assert "node n2: its status reports no policy (an older agent); not checked" in done.stderr

    # the node's own policy allows them: the same commit is valid
    publish_statuses(
        mosquitto.url, {"n1": NodePolicy(allow=("/srv", "/etc"), processes=True, users=("root",))}
    )
    done = validate(path, mosquitto.url)
    assert done.returncode == 0, done.stdout + done.stderr


def test_an_unreachable_broker_is_a_usage_error(tmp_path: Path):
    done = validate(repo(tmp_path), "mqtt://127.0.0.1:1")
    assert done.returncode == 2
    assert "phrame validate: cannot read the node policies from the broker" in done.stderr
