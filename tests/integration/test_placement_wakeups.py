"""What wakes the running placement loop between resyncs (real mosquitto, real git): a new
commit config-sync reports on an environment's ``sync`` topic, and a message that changes a
node's liveness. The resync interval is an hour, so only those can bring the passes seen."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.test_placement_git import NODES
from tests.integration.test_placement_loop import TOPICS, Harness, heartbeat
from tests.support.mosquitto import Mosquitto
from tests.support.services import wait_until

RECORDER = (
    "name: recorder\nimage: rec:1\nresources: {cpus: 1, memory: 1Gi}\nplacement:\n  labels: {role: edge}\n"
)


@pytest.fixture
def running(mosquitto: Mosquitto, tmp_path: Path) -> Iterator[Harness]:
    """The loop running on its own thread, after its first pass placed studio-a."""
    h = Harness(mosquitto, tmp_path, interval_s=3600)
    h.nodes.publish_batch([(TOPICS.heartbeat(n), heartbeat(h.clock.now)) for n in NODES])
    thread = threading.Thread(target=h.loop.run, name="test-placement-loop", daemon=True)
    thread.start()
    try:
        wait_until(lambda: "placement" in h.remote.message(), "the first placement committed")
        yield h
    finally:
        h.loop.stop()
        thread.join(15)
        h.close()
    assert not thread.is_alive()


def sync_state(commit: str, env: str = "studio-a") -> bytes:
    return json.dumps({"environment": env, "ref": "main", "ok": True, "commit": commit}).encode()


def test_a_commit_config_sync_reports_is_placed_at_once(running: Harness) -> None:
    h = running
    sha = h.remote.change("environments/studio-a/services/recorder.yaml", RECORDER, "add recorder")
    h.nodes.publish(TOPICS.env_sync("studio-a"), sync_state(sha))  # live, as config-sync sends it
    wait_until(lambda: "recorder" in h.remote.node_json()["assignments"], "recorder placed", timeout=15)
    assert h.remote.node_json()["assignments"]["recorder"] == ["edge-01"]
    assert h.remote.head("main~1") == sha  # decided on top of the reported commit


def test_a_node_going_offline_is_seen_at_once_and_its_move_is_pending(running: Harness) -> None:
    h = running
    assert h.state()["pending"] == []
    h.nodes.publish_batch([(TOPICS.status("edge-03"), json.dumps({"state": "offline"}).encode())])
    wait_until(lambda: h.state()["pending"], "a pending move published", timeout=15)
    (pending,) = h.state()["pending"]
    assert pending["node"] == "edge-03" and pending["replica"] == "mixer.1"


def test_a_heartbeat_that_changes_nothing_wakes_nothing(running: Harness) -> None:
    h = running
    state = h.state()
    sha = h.remote.change("environments/studio-a/services/recorder.yaml", RECORDER, "add recorder")
    h.beat()  # every node was alive already
    # a marker after the heartbeats on the same connection: once seen, they were handled
    h.nodes.publish(TOPICS.env_sync("elsewhere"), sync_state(sha, "elsewhere"))
    wait_until(lambda: h.loop.triggers.commit_of("elsewhere") == sha, "the marker seen")
    wait_until(h.loop.runner.queue.is_idle, "the loop idle")
    assert h.remote.head() == sha and h.state() == state  # recorder waits for its sync state
