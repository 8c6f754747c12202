"""The actual-plane mirror and heartbeats, against a real mosquitto: heartbeats never stop,
so they are no change that makes a snapshot due; heartbeats alone are written every
``PHRAME_MIRROR_HEARTBEAT_DELAY_MS``, and a snapshot written for a change carries the
latest heartbeat. Readers (the topic API) get every heartbeat at once from the notices.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from phrame.mqtt import MqttClient, MqttSettings
from tests.support.mirror import mirror_settings, running_mirror
from tests.support.mosquitto import Mosquitto
from tests.support.waiting import wait_for

pytestmark = pytest.mark.mqtt
HB = "phrame/actual/nodes/n1/heartbeat"
STATUS = "phrame/actual/nodes/n1/status"


def beat(seq: int) -> bytes:
    return json.dumps({"ts": time.time(), "seq": seq, "interval_s": 0.02}).encode()


def start_writer(mosquitto: Mosquitto, clients: list) -> MqttClient:
    """A connected client publishing as the agents do (stopped by the ``clients`` fixture)."""
    writer = MqttClient(MqttSettings(url=mosquitto.url, reconnect_max_s=1), "writer")
    writer.start(timeout=5)
    clients.append(writer)
    return writer


def held(path: Path, topic: str) -> object:
    try:
        return json.loads(path.read_text())["topics"].get(topic) if path.exists() else None
    except ValueError:
        return None


@pytest.mark.slow
def test_a_storm_of_heartbeats_writes_no_snapshot_and_a_change_carries_the_last_beat(
    mosquitto: Mosquitto, clients: list, tmp_path: Path
) -> None:
    settings = mirror_settings(
        mosquitto.url, tmp_path, debounce_s=0.05, max_delay_s=0.2, heartbeat_delay_s=60
    )
    writer = start_writer(mosquitto, clients)
    with running_mirror(settings) as mirror:
        writer.publish_batch([(STATUS, b'{"state":"online"}')])
        wait_for(lambda: held(settings.snapshot_path, STATUS) == {"state": "online"}, "the status", 5)
        wait_for(lambda: len(mirror.written) == 1, "the write counted (after the file's rename)", 5)
        writes = len(mirror.written)
        seq, end = 0, time.monotonic() + 1.5  # the storm's length: 7 max delays
        while time.monotonic() < end:
            seq += 1
            writer.publish_batch([(HB, beat(seq))], retain=False)
        wait_for(lambda: mirror.messages >= 1 + seq, "every heartbeat at the mirror", 30)
        assert len(mirror.written) == writes, "heartbeats alone made snapshots due every max delay"

        writer.publish_batch([(STATUS, b'{"state":"online","commit":"c2"}')])
        wait_for(lambda: (held(settings.snapshot_path, STATUS) or {}).get("commit") == "c2", "the change", 5)
        assert (held(settings.snapshot_path, HB) or {}).get("seq") == seq, (
            "the change's snapshot lacks the beat"
        )


def test_heartbeats_alone_are_written_after_the_heartbeat_delay(
    mosquitto: Mosquitto, clients: list, tmp_path: Path
) -> None:
    settings = mirror_settings(
        mosquitto.url, tmp_path, debounce_s=0.05, max_delay_s=0.2, heartbeat_delay_s=0.5
    )
    writer = start_writer(mosquitto, clients)
    with running_mirror(settings):
        writer.publish_batch([(HB, beat(7))], retain=False)
        wait_for(
            lambda: (held(settings.snapshot_path, HB) or {}).get("seq") == 7, "the heartbeat's snapshot", 10
        )
