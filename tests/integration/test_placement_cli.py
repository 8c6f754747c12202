"""``phrame placement --once`` as a real process: retained heartbeats from a real mosquitto,
one pass against a real bare remote, the state printed and published."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from phrame.mqtt import MqttClient, MqttSettings
from schemas import Topics
from tests.integration.test_placement_git import NODES, ConfigRemote
from tests.integration.test_placement_loop import heartbeat
from tests.support.mosquitto import Mosquitto

ROOT = Path(__file__).resolve().parents[2]
TOPICS = Topics("phrame")


def placement_once(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """``phrame placement --once`` as a subprocess with ``env``."""
    cmd = [sys.executable, "-m", "phrame", "placement", "--once"]
    return subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)


@pytest.mark.slow
def test_once_places_prints_and_publishes(mosquitto: Mosquitto, tmp_path: Path) -> None:
    remote = ConfigRemote(tmp_path)
    client = MqttClient(MqttSettings(url=mosquitto.url), "test-cli")
    client.start()
    try:
        client.publish_batch([(TOPICS.heartbeat(n), heartbeat(time.time())) for n in NODES])
        env = dict(os.environ) | {
            "PHRAME_REPO_URL": str(remote.bare),
            "PHRAME_DESIRED_MQTT_URL": mosquitto.url,
            "PHRAME_STATE_DIR": str(tmp_path / "state"),
        }
        done = placement_once(env)
        assert done.returncode == 0, done.stderr
        states = json.loads(done.stdout)
        assert [s["environment"] for s in states] == ["studio-a"]
        assert states[0]["last_commit"] == remote.head()
        assert remote.node_json()["assignments"]["mixer"] == ["edge-02", "edge-03"]
        topic = TOPICS.env_placement("studio-a")
        published = json.loads(client.collect_retained(topic, settle=0.1)[topic])
        assert published["last_commit"] == remote.head()

        again = placement_once(env)
        assert again.returncode == 0 and json.loads(again.stdout)[0]["last_commit"] is None
        assert remote.count() == 2  # the initial config and one placement commit: a fixed point
    finally:
        client.stop()


def test_bad_settings_exit_2(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PHRAME_")}
    done = placement_once(env)
    assert done.returncode == 2 and "PHRAME_REPO_URL" in done.stderr
