"""schemathesis (PyPI) against the running topic API's ``/openapi.json``: generated requests,
valid and invalid, never get a 5xx, and every answer matches the documented status codes,
content types and response schemas. Real mosquitto, mirrors and uvicorn; about 30 s.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest

from config_sync.reporting import LocalReporter
from config_sync.service import ConfigSync
from phrame.mqtt import Message, MqttClient, MqttSettings
from schemas import Topics
from tests.integration.test_sync_app import serving
from tests.support.mosquitto import Mosquitto
from tests.support.sync_support import SECRET, ConfigRemote, settings_for
from tests.support.topic_api import ApiStack, fleet

pytestmark = pytest.mark.mqtt
CHECKS = "not_a_server_error,status_code_conformance,content_type_conformance,response_schema_conformance"
EXAMPLES = "50"  # per operation; keeps the run well under a minute on 2 cores


def answer_logs(client: MqttClient, msg: Message) -> None:
    """The agents' part of a log tail request: two lines (a 504 would be a 5xx)."""
    t, doc = Topics(), json.loads(msg.payload)
    parsed = t.parse(msg.topic)
    reply = {"id": doc["id"], "node": parsed.node, "item": parsed.item_id, "at": time.time(),
             "lines": ["one", "two"], "truncated": False}  # fmt: skip
    client.publish(t.reply(str(parsed.node), doc["id"]), json.dumps(reply).encode(), retain=False)


@pytest.mark.slow
def test_schemathesis_finds_no_5xx_and_no_schema_violation(
    mosquitto: Mosquitto, clients: list, tmp_path: Path
) -> None:
    writer = MqttClient(MqttSettings(url=mosquitto.url), "schema-writer")
    writer.start(timeout=5)
    clients.append(writer)
    messages = fleet(["dev-1", "dev-2"], 2)
    # one container died a moment ago and runs again: its item carries recent_exit
    topic = Topics().actual_item("dev-1", "containers", "demo.svc0.0")
    finished = datetime.fromtimestamp(time.time() - 5, UTC).strftime("%Y-%m-%dT%H:%M:%S.%f000Z")
    last = {"exit_code": 137, "finished_at": finished, "restarted_by": "agent"}
    restarted = {
        **json.loads(messages[topic]),
        "finished_at": finished,
        "last_exit": last,
        "agent_restarts": 1,
    }
    messages[topic] = json.dumps(restarted).encode()
    writer.publish_batch(messages.items())
    writer.subscribe("phrame/cmd/nodes/+/containers/+/logs", lambda m: answer_logs(writer, m))
    # promote and rollback are forwarded to a real config-sync: its answers (a 401 for the
    # API's token, which is not config-sync's) come back as documented
    remote = ConfigRemote.with_sample(tmp_path / "git")
    settings = settings_for(
        remote, tmp_path / "sync-state", mosquitto.url, webhook_secret=SECRET, poll_s=3600,
        topic_prefix="schema-sync",  # its own plane: the API's fleet stays the two nodes above
    )  # fmt: skip
    service = ConfigSync(settings, reporter=LocalReporter())
    with serving(service) as sync_url:
        run_schemathesis(ApiStack(mosquitto.url, tmp_path, PHRAME_CONFIG_SYNC_URL=sync_url).start(), tmp_path)


def run_schemathesis(stack: ApiStack, tmp_path: Path) -> None:
    try:
        stack.wait_json("/api/nodes", lambda d: len(d["nodes"]) == 2, "the fleet in the API")
        assert stack.json("/api/nodes/dev-1")["recent_exits"] == 1  # the shape is exercised
        st = Path(sys.executable).with_name("st")
        cmd = [
            str(st),
            "run",
            f"{stack.url}/openapi.json",
            "--checks",
            CHECKS,
            "--max-examples",
            EXAMPLES,
            "--exclude-path",
            "/api/events",  # a stream never ends: covered by test_topic_api.py
            "--header",
            f"Authorization: Bearer {stack.token}",
            "--request-timeout",
            "10",
            "--generation-deterministic",
            "--no-color",
        ]
        env = {**os.environ, "SCHEMATHESIS_HOOKS": ""}
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=170, env=env, cwd=tmp_path)
        assert done.returncode == 0, f"{done.stdout[-6000:]}\n{done.stderr[-2000:]}\n{stack.logs()[-3000:]}"
        tested = re.search(r"Tested: (\d+)", done.stdout)
        assert tested and int(tested.group(1)) >= 13, done.stdout[-3000:]  # every route but the stream
    finally:
        stack.stop()
