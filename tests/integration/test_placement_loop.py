"""The placement loop with a real mosquitto carrying heartbeats published by the test and a
real bare git remote: liveness → decisions → commits → state on the desired plane.
The loop's passes are driven by the test with a fake clock, so nothing waits for a grace period."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from phrame.mqtt import MqttClient, MqttSettings
from placement.git_repo import PlacementRepo
from placement.loop import PlacementLoop
from placement.reconcile import PlacementReconciler
from schemas import Topics, check_payload
from tests.integration.test_placement_git import NODES, Clock, ConfigRemote
from tests.support.actual import placement_health
from tests.support.mosquitto import Mosquitto
from tests.support.services import wait_until

TOPICS = Topics("phrame")


def heartbeat(ts: float, seq: int = 1) -> bytes:
    host = {
        "cpu_percent": 1.0,
        "load1": 0.1,
        "mem_total": 1e9,
        "mem_used": 1e8,
        "disk_total": 1e10,
        "disk_used": 1e9,
    }
    return json.dumps({"ts": ts, "seq": seq, "interval_s": 5, "host": host}).encode()


class Harness:
    """The loop on ``broker`` (and the desired plane on ``desired`` when given), a fake clock
    for its decisions, and clients playing the node agents and a state watcher."""

    def __init__(
        self, broker: Mosquitto, tmp: Path, desired: Mosquitto | None = None, *, interval_s: float = 1
    ) -> None:
        self.clock = Clock(time.time())
        self.remote = ConfigRemote(tmp)
        settings = MqttSettings(url=broker.url, reconnect_max_s=2)  # quick back after a restart
        desired_settings = MqttSettings(url=desired.url) if desired else settings
        self.nodes = MqttClient(settings, "test-nodes")  # plays every node agent
        self.nodes.start()
        self.watcher = MqttClient(desired_settings, "test-watcher")
        self.watcher.start()
        self.liveness = placement_health(timeout_s=20, started_at=self.clock.now, clock=self.clock)
        client = MqttClient(settings, "test-placement")
        self.desired = MqttClient(desired_settings, "test-placement-desired") if desired else client
        reconciler = PlacementReconciler(
            PlacementRepo(str(self.remote.bare), tmp / "cache.git"),
            self.liveness,
            clock=self.clock,
            reschedule_after_s=60,
            node_gc_s=3600,
            instance="loop/1",
        )
        self.loop = PlacementLoop(
            reconciler,
            self.liveness,
            actual=client,
            desired=self.desired,
            topics=TOPICS,
            clock=self.clock,
            interval_s=interval_s,
        )
        self.seq = 0

    def beat(self, nodes: tuple[str, ...] = NODES) -> None:
        """Publish one retained heartbeat per node and wait until the loop has seen them."""
        self.seq += 1
        self.nodes.publish_batch([(TOPICS.heartbeat(n), heartbeat(self.clock.now, self.seq)) for n in nodes])
        wait_until(
            lambda: all(h.alive for h in self.liveness.health(nodes, self.clock.now).values()),
            "heartbeats seen",
        )

    def state(self) -> dict[str, Any]:
        topic = TOPICS.env_placement("studio-a")
        doc: dict[str, Any] = json.loads(self.watcher.collect_retained(topic, settle=0.1)[topic])
        check_payload("desired-placement", doc)
        return doc

    def close(self) -> None:
        self.loop.close()
        self.nodes.stop()
        self.watcher.stop()


@pytest.fixture
def harness(mosquitto: Mosquitto, tmp_path: Path) -> Iterator[Harness]:
    h = Harness(mosquitto, tmp_path)
    yield h
    h.close()


def test_loop_places_from_retained_heartbeats_and_publishes_its_state(harness: Harness) -> None:
    h = harness
    # heartbeats retained before the loop starts: it reads them on connect
    h.nodes.publish_batch([(TOPICS.heartbeat(n), heartbeat(h.clock.now)) for n in NODES])
    h.loop.connect()
    assert all(x.alive for x in h.liveness.health(NODES, h.clock.now).values())
    results = h.loop.run_pass()
    assert results[0].commit == h.remote.head()
    assert h.remote.node_json()["assignments"] == {"egress": ["core-01"], "mixer": ["edge-02", "edge-03"]}
    state = h.state()
    assert state["last_commit"] == h.remote.head() and state["mode"] == "auto" and state["error"] is None
    assert state["assignments"]["mixer"] == ["edge-02", "edge-03"]
    assert "new replica: mixer.0 (unassigned) → edge-02" in state["moves"]
    assert state["unassigned"] == [] and state["pending"] == [] and state["instance"] == "loop/1"


def test_node_loss_over_mqtt_moves_its_replica_only_after_the_grace_period(harness: Harness) -> None:
    h = harness
    h.loop.connect()
    h.beat()
    h.loop.run_pass()
    first = h.remote.head()
    last = h.clock.now
    alive = ("core-01", "edge-01", "edge-03")

    h.clock.now = last + 50  # edge-02 silent: offline since last + 20 s
    h.beat(alive)
    assert h.loop.run_pass()[0].commit is None and h.remote.head() == first
    state = h.state()
    assert state["pending"] == [
        {"replica": "mixer.0", "node": "edge-02", "offline_for_s": 30.0, "moves_in_s": 30.0}
    ]

    h.clock.now = last + 90
    h.beat(alive)
    moved = h.loop.run_pass()[0]
    assert moved.commit == h.remote.head() != first
    assert h.remote.node_json()["assignments"]["mixer"] == ["edge-01", "edge-03"]
    assert "edge-02 offline for 70 s: mixer.0 edge-02 → edge-01" in h.remote.message()
    state = h.state()
    assert state["last_commit"] == moved.commit and state["pending"] == []
    assert state["moves"] == ["edge-02 offline for 70 s: mixer.0 edge-02 → edge-01"]

    h.clock.now += 5  # edge-02 is back: nothing moves back
    h.beat()
    assert h.loop.run_pass()[0].commit is None and h.remote.head() == moved.commit


def test_offline_status_from_a_will_counts_and_invalid_payloads_are_ignored(harness: Harness) -> None:
    h = harness
    h.loop.connect()
    h.beat()
    h.loop.run_pass()
    h.nodes.publish_batch(
        [
            (TOPICS.status("edge-03"), json.dumps({"state": "offline"}).encode()),
            (TOPICS.heartbeat("edge-02"), b"{not json"),
            (TOPICS.heartbeat("edge-01"), json.dumps({"ts": "yesterday"}).encode()),
        ]
    )
    wait_until(lambda: not h.liveness.health(["edge-03"], h.clock.now)["edge-03"].alive, "edge-03 offline")
    health = h.liveness.health(NODES, h.clock.now)
    assert health["edge-02"].alive and health["edge-01"].alive  # bad payloads changed nothing
    h.clock.now += 61  # heartbeats of the others keep coming; edge-03 offline for 61 s by its status
    h.beat(("core-01", "edge-01", "edge-02"))
    h.loop.run_pass()
    assert h.remote.node_json()["assignments"]["mixer"] == ["edge-02", "edge-01"]
    assert "edge-03 offline for 61 s: mixer.1 edge-03 → edge-01" in h.remote.message()


def test_the_state_is_republished_only_when_it_changes(harness: Harness) -> None:
    """A pass that decides the same (a node offline and its move pending,
    or nothing at all) publishes nothing, although its figures in seconds moved on."""
    h = harness
    topic = TOPICS.env_placement("studio-a")
    sentinel = TOPICS.env_placement("studio-a") + "-test-sentinel"
    seen: list[dict[str, Any]] = []
    marks: list[bytes] = []

    def record(msg: Any) -> None:
        if msg.topic == topic and msg.payload:
            seen.append(json.loads(msg.payload))
        elif msg.topic == sentinel:
            marks.append(msg.payload)

    h.watcher.subscribe(topic, record)
    h.watcher.subscribe(sentinel, record)

    def publications_after(passes: int, nodes: tuple[str, ...], step_s: float) -> int:
        before = len(seen)
        for _ in range(passes):
            h.clock.now += step_s
            h.beat(nodes)
            h.loop.run_pass()
        # the loop's own client sends a mark after its passes: once it arrived, so did they
        mark = f"after {len(seen)} at {h.clock.now}".encode()
        h.desired.publish_batch([(sentinel, mark)], retain=False)
        wait_until(lambda: mark in marks, "the sentinel after the passes")
        return len(seen) - before

    h.loop.connect()
    assert publications_after(1, NODES, 1) == 1  # the first state, with the moves it committed
    assert publications_after(1, NODES, 5) == 1  # a pass that moved nothing: moves is empty again
    assert publications_after(3, NODES, 5) == 0  # steady: nothing to say
    alive = ("core-01", "edge-01", "edge-03")
    h.clock.now += 20  # edge-02 silent from here on
    assert publications_after(1, alive, 5) == 1  # edge-02 offline: its replica's move is pending
    assert seen[-1]["pending"][0]["node"] == "edge-02"
    assert publications_after(3, alive, 5) == 0  # still pending: only the countdown moved
