"""Placement across an outage of its own broker, and of the fleet's link to it (real mosquitto,
real git, a fake clock for decisions): hearing nothing is not every node going offline.
While the broker is down, or no node is heard, nothing is decided; once it is back every
node gets a whole timeout of silence first."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.integration.test_placement_loop import Harness
from tests.support.mosquitto import Mosquitto
from tests.support.services import wait_until

ALIVE = ("core-01", "edge-01", "edge-03")  # edge-02 dies during the outage


def test_broker_outage_moves_nothing_and_a_reconnect_restarts_the_timeout(
    mosquitto: Mosquitto, tmp_path: Path
) -> None:
    h = Harness(mosquitto, tmp_path)
    try:
        h.loop.connect()
        h.beat()
        h.loop.run_pass()
        first, last = h.remote.head(), h.clock.now
        assert h.remote.node_json()["assignments"]["mixer"] == ["edge-02", "edge-03"]

        mosquitto.stop()
        wait_until(lambda: not h.loop.actual.is_connected, "placement to see its broker go", timeout=30)
        h.clock.now = last + 200  # far past PHRAME_NODE_TIMEOUT_S + PHRAME_RESCHEDULE_AFTER_S
        assert h.loop.run_pass() == [] and h.remote.head() == first  # deaf: decides nothing
        assert h.loop.listening.deaf_since == last + 200

        mosquitto.start()
        clients = (h.loop.actual, h.nodes, h.watcher)
        wait_until(lambda: all(c.is_connected for c in clients), "reconnects", timeout=60)
        h.clock.now = last + 210
        h.beat(ALIVE)
        (back,) = h.loop.run_pass()
        assert back.commit is None and back.error is None and h.remote.head() == first
        state = h.state()  # republished: the restarted broker lost the retained copy
        assert state["pending"] == [] and state["held"] is None and state["moves"] == []

        h.clock.now = last + 290  # edge-02 silent for 80 s since the reconnect: 60 s offline
        h.beat(ALIVE)
        assert h.loop.run_pass()[0].commit is None and h.remote.head() == first
        assert h.state()["pending"] == [
            {"replica": "mixer.0", "node": "edge-02", "offline_for_s": 60.0, "moves_in_s": 0.0}
        ]
        h.clock.now = last + 291
        h.beat(ALIVE)
        moved = h.loop.run_pass()[0]
        assert moved.commit == h.remote.head() != first
        assert h.remote.node_json()["assignments"]["mixer"] == ["edge-01", "edge-03"]
        assert "edge-02 offline for 61 s: mixer.0 edge-02 → edge-01" in h.remote.message()
    finally:
        h.close()


@pytest.mark.slow
def test_deaf_placement_says_so_on_a_separate_desired_broker(mosquitto: Mosquitto, tmp_path: Path) -> None:
    desired = Mosquitto().start()
    h = Harness(mosquitto, tmp_path, desired=desired)
    try:
        h.loop.connect()
        h.beat()
        h.loop.run_pass()
        first = h.remote.head()
        assert h.state()["held"] is None and h.state()["last_commit"] == first
        mosquitto.stop()
        wait_until(lambda: not h.loop.actual.is_connected, "placement to see its broker go", timeout=30)
        h.clock.now += 500
        assert h.loop.run_pass() == [] and h.remote.head() == first
        state = h.state()
        assert (
            state["held"] is not None
            and f"not connected to the actual plane ({mosquitto.url})" in state["held"]
        )
        assert state["assignments"]["mixer"] == ["edge-02", "edge-03"] and state["last_commit"] == first
    finally:
        h.close()
        h.desired.stop()
        desired.stop()


def test_no_node_heard_at_all_moves_nothing_and_its_end_gives_every_node_a_timeout(
    mosquitto: Mosquitto, tmp_path: Path
) -> None:
    """Connected, yet every node silent far past the grace period (a partition between
    the broker and the fleet): the full-disruption guard keeps node.json as it is. When the
    first node is heard again the others (agents reconnecting with backoff) get a whole
    timeout from then: nothing moves to the first node back."""
    h = Harness(mosquitto, tmp_path)
    try:
        h.loop.connect()
        h.beat()
        h.loop.run_pass()
        first = h.remote.head()
        h.clock.now += 300
        (result,) = h.loop.run_pass()
        assert result.commit is None and h.remote.head() == first
        state = h.state()
        assert state["held"] is not None and "no node of the inventory is alive" in state["held"]
        assert state["assignments"]["mixer"] == ["edge-02", "edge-03"] and state["error"] is None

        h.clock.now += 1
        back = h.clock.now
        h.beat(("edge-01",))  # the first agent back: nobody else's replicas move to it
        (result,) = h.loop.run_pass()
        assert result.commit is None and h.remote.head() == first
        state = h.state()
        assert state["held"] is None and state["moves"] == [] and state["pending"] == []

        h.clock.now = back + 5
        h.beat(ALIVE)  # the others back within their timeout; edge-02 never returns
        h.clock.now = back + 80  # edge-02 silent for 80 s since the first node came back
        h.beat(ALIVE)
        assert h.loop.run_pass()[0].commit is None and h.remote.head() == first
        assert h.state()["pending"] == [
            {"replica": "mixer.0", "node": "edge-02", "offline_for_s": 60.0, "moves_in_s": 0.0}
        ]
        h.clock.now = back + 81
        h.beat(ALIVE)
        assert h.loop.run_pass()[0].commit == h.remote.head() != first
        assert h.remote.node_json()["assignments"]["mixer"] == ["edge-01", "edge-03"]
        assert "edge-02 offline for 61 s: mixer.0 edge-02 → edge-01" in h.remote.message()
    finally:
        h.close()
