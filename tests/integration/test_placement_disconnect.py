"""An environment's ``disconnect.grace_s`` replaces placement's ``PHRAME_RESCHEDULE_AFTER_S`` for
its replicas (real mosquitto carrying heartbeats, real git, the loop's fake clock)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.test_placement_loop import Harness
from tests.support.mosquitto import Mosquitto

ENV_FILE = "environments/studio-a/environment.yaml"
ALIVE = ("core-01", "edge-01", "edge-03")  # edge-02 goes silent


@pytest.fixture
def harness(mosquitto: Mosquitto, tmp_path: Path) -> Iterator[Harness]:
    h = Harness(mosquitto, tmp_path)
    yield h
    h.close()


def test_a_silent_nodes_replica_waits_for_the_environments_disconnect_grace(harness: Harness) -> None:
    h = harness
    text = h.remote.show(ENV_FILE)
    h.remote.change(ENV_FILE, text.rstrip("\n") + "\ndisconnect:\n  grace_s: 300\n", "edge site: 5 min grace")
    h.loop.connect()
    h.beat()
    h.loop.run_pass()
    first, last = h.remote.head(), h.clock.now
    assert h.remote.node_json()["assignments"]["mixer"] == ["edge-02", "edge-03"]

    h.clock.now = last + 90  # offline since last + 20 s: 70 s, past the 60 s default
    h.beat(ALIVE)
    assert h.loop.run_pass()[0].commit is None and h.remote.head() == first
    assert h.state()["pending"] == [
        {"replica": "mixer.0", "node": "edge-02", "offline_for_s": 70.0, "moves_in_s": 230.0}
    ]

    h.clock.now = last + 321  # 301 s offline: past the environment's grace
    h.beat(ALIVE)
    moved = h.loop.run_pass()[0]
    assert moved.commit == h.remote.head() != first
    assert h.remote.node_json()["assignments"]["mixer"] == ["edge-01", "edge-03"]
    assert "edge-02 offline for 301 s: mixer.0 edge-02 → edge-01" in h.remote.message()
