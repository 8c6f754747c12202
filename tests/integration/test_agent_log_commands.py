"""Log tail commands against a real agent, mosquitto and dockerd.

A running container's current tail comes back on the node's reply topic (not retained),
its secret env value masked; a container of another node or one phrame does not manage
gets an error and no line; a retained, stale or repeated command gets no answer at all. A
fresh command is the barrier that shows the agent has handled what came before it.
"""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from node_agent.models import MANAGED, NODE
from schemas import Topics, check_payload
from tests.support.agent_support import ActualWatcher, AgentEnv, AgentProcess, item_labels, topics_doc
from tests.support.docker import TEST_LABEL

pytestmark = [pytest.mark.slow, pytest.mark.mqtt]
T = Topics()
SECRET = "hunter2-secret-value"


def logs_payload(*, ts: float | None = None, command_id: str | None = None, lines: int = 50) -> bytes:
    doc = {"id": command_id or uuid.uuid4().hex, "ts": time.time() if ts is None else ts, "lines": lines}
    doc["requested_by"] = "test"
    check_payload("cmd-logs", doc)
    return json.dumps(doc).encode()


def ask(watcher: ActualWatcher, node: str, item_id: str, **kw: Any) -> str:
    """Send a fresh log command (not retained); its id."""
    command_id = uuid.uuid4().hex
    watcher.client.publish_batch(
        [(T.logs(node, item_id), logs_payload(command_id=command_id, **kw))], retain=False
    )
    return command_id


def reply(watcher: ActualWatcher, node: str, command_id: str, what: str) -> dict[str, Any]:
    topic = T.reply(node, command_id)
    watcher.wait_for(lambda: watcher.latest.get(topic) is not None, 30, what)
    doc: dict[str, Any] = watcher.latest[topic]
    check_payload("actual-reply", doc)
    return doc


def test_a_log_command_gets_the_containers_current_tail_masked_and_nothing_else(
    env: AgentEnv, watcher: ActualWatcher, mosquitto, tmp_path: Path
) -> None:
    secrets = tmp_path / "secrets"
    secrets.mkdir()
    (secrets / "db").write_text(SECRET + "\n")
    script = 'echo boom >&2; for i in 1 2 3 4 5; do echo "line-$i"; done; echo "password is $DB_PASSWORD"; sleep 3600'
    web = env.container("web", command=["sh", "-c", script], env={"DB_PASSWORD": {"file": "db"}})
    watcher.publish(topics_doc(env.node, [web]))
    # a retained command, fresh, waiting on the broker: the agent gets it as a replay on subscribe
    retained_id = uuid.uuid4().hex
    watcher.client.publish_batch([(T.logs(env.node, web["name"]), logs_payload(command_id=retained_id))])
    # another node's container and one phrame does not manage, on the same daemon
    alien, stray = f"{env.env}.alien.0", f"{env.env}.stray.0"
    alien_labels = {MANAGED: "true", NODE: f"other-{env.node}", TEST_LABEL: env.label, **item_labels(alien)}
    for name, labels in ((alien, alien_labels), (stray, {TEST_LABEL: env.label, **item_labels(stray)})):
        env.client.containers.run(env.image, ["sh", "-c", "echo private; sleep 3600"], name=f"{name}-{env.node}",
                                  labels=labels, detach=True)  # fmt: skip
    agent = AgentProcess(
        env.process_env(
            str(tmp_path / "state"), PHRAME_DESIRED_MQTT_URL=mosquitto.url, PHRAME_SECRETS_DIR=str(secrets)
        ),
        str(tmp_path / "agent.log"),
    )
    try:
        watcher.wait_for(lambda: (watcher.status() or {}).get("converged") is True, 30, "converged")
        watcher.wait_for(lambda: b"password" in env.get(web["name"]).logs(), 30, "web printed its lines")

        got = reply(watcher, env.node, ask(watcher, env.node, web["name"], lines=3), "the tail of web")
        assert got["node"] == env.node and got["item"] == web["name"] and "error" not in got, got
        assert len(got["lines"]) == 3 and "password is ***" in got["lines"], got  # streams interleave
        assert got["truncated"] is True  # more lines were there than asked for
        assert SECRET not in json.dumps(got) and SECRET not in agent.log()
        whole = reply(watcher, env.node, ask(watcher, env.node, web["name"]), "the whole tail of web")
        assert whole["truncated"] is False and {"boom", "line-1", "line-5"} <= set(whole["lines"]), whole

        for name in (alien, stray):
            refused = reply(watcher, env.node, ask(watcher, env.node, name), f"the answer for {name}")
            assert refused["lines"] == [] and "no managed container" in refused["error"], refused

        # stale, then one id twice; then a fresh barrier: all before it are handled
        stale_id, once_id = uuid.uuid4().hex, uuid.uuid4().hex
        topic = T.logs(env.node, web["name"])
        watcher.client.publish_batch(
            [
                (topic, logs_payload(command_id=stale_id, ts=0)),
                (topic, logs_payload(command_id=once_id)),
                (topic, logs_payload(command_id=once_id)),
            ],
            retain=False,
        )
        reply(watcher, env.node, ask(watcher, env.node, web["name"]), "the barrier's answer")
        assert watcher.counts.get(T.reply(env.node, once_id)) == 1, "one id answered twice (or never)"
        assert T.reply(env.node, stale_id) not in watcher.latest, "a command of 1970 was answered"
        assert T.reply(env.node, retained_id) not in watcher.latest, "the broker's replay was answered"
        log = agent.log()
        assert "it is retained" in log and "s old" in log and "already ran" in log, log[-4000:]
    finally:
        agent.terminate()
        watcher.client.publish_batch([(T.logs(env.node, web["name"]), None)])
