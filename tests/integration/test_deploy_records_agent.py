"""The whole loop for the ``deploys`` topic: a git push, config-sync, a real
``phrame node-agent`` on the real daemon. The record converges when the agent applied the
commit; the update of a container that ignores SIGTERM takes its ``stop_grace_period``
(1 s), not the agent's 10 s; a commit the agent cannot apply fails, naming the node."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from schemas import Topics, check_payload
from tests.support.agent_support import AgentEnv, AgentProcess
from tests.support.mosquitto import Mosquitto
from tests.support.services import eventually
from tests.support.sync_support import ConfigRemote, reader, running_sync, settings_for

T = Topics()
IGNORES_TERM = "trap '' TERM; while :; do sleep 0.2; done"


def repo_files(env: AgentEnv, *, image: str, version: int) -> dict[str, str]:
    service = f"""name: web
image: {image}
command: ["sh", "-c", "{IGNORES_TERM} # v{version}"]
restart: "no"
stop_grace_period: 1s
placement:
  node: {env.node}
"""
    return {
        f"nodes/{env.node}.yaml": f"name: {env.node}\n",
        f"environments/{env.env}/environment.yaml": f"name: {env.env}\n",
        f"environments/{env.env}/services/web.yaml": service,
    }


def records(client: Any, env: AgentEnv) -> list[dict[str, Any]]:
    raw = client.collect_retained(T.env_deploys(env.env), settle=0.1).get(T.env_deploys(env.env))
    if not raw:
        return []
    doc = json.loads(raw)
    check_payload("desired-deploys", doc)
    return list(doc["deploys"])


@pytest.mark.slow
def test_records_follow_a_real_agent(tmp_path: Path, mosquitto: Mosquitto, env: AgentEnv) -> None:
    remote = ConfigRemote(tmp_path / "git")
    first = remote.commit("web: first", files=repo_files(env, image=env.image, version=1))
    agent = AgentProcess(
        env.process_env(
            str(tmp_path / "agent"), PHRAME_DESIRED_MQTT_URL=mosquitto.url, PHRAME_STOP_TIMEOUT_S="10"
        ),
        str(tmp_path / "agent.log"),
    )
    settings = settings_for(
        remote, tmp_path / "sync", mosquitto.url, poll_s=3600, debounce_s=0, deploy_timeout_s=12,
        deploy_settle_s=0.5,  # the duration measures the stop grace, not how long a replica must run
    )  # fmt: skip
    try:
        with running_sync(settings) as service, reader(mosquitto.url) as client:
            assert eventually(
                lambda: [(d["commit"], d["state"]) for d in records(client, env)] == [(first, "converged")],
                30,
            ), agent.log()
            second = remote.commit("web: v2", files=repo_files(env, image=env.image, version=2))
            service.syncer.sync_ref("main")
            assert eventually(lambda: records(client, env)[0]["state"] == "converged", 30), agent.log()
            update = records(client, env)[0]
            assert (update["commit"], update["message"], update["nodes"]) == (
                second,
                "web: v2",
                {env.node: 2},
            )
            # the old container ignored SIGTERM: its 1 s grace, not the agent's 10 s
            assert update["duration_s"] < 5, update
            third = remote.commit(
                "web: absent image", files=repo_files(env, image="127.0.0.1:9/absent:1", version=3)
            )
            service.syncer.sync_ref("main")
            assert eventually(lambda: records(client, env)[0]["state"] == "failed", 40), agent.log()
            failed = records(client, env)[0]
            assert failed["commit"] == third and failed["failed"]["node"] == env.node
            assert [d["state"] for d in records(client, env)] == ["failed", "converged", "converged"]
    finally:
        agent.terminate()
        # io.phrame.* labels are reserved in a repo, so no test label: this test's node is unique
        for c in env.managed():
            c.remove(force=True)
