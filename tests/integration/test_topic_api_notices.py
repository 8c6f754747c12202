"""The topic API is told of each change by the mirrors (a packet per change, between the
debounced snapshots): real mosquitto, ``phrame mirror`` and ``phrame topic-api`` processes.
With a snapshot debounce of 4 s, a change reaches ``/api/events`` and ``/api/nodes`` long
before the snapshot holding it is written, and the snapshot that follows changes nothing."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import pytest

from phrame.mqtt import MqttClient, MqttSettings
from schemas import Topics
from tests.support.mosquitto import Mosquitto
from tests.support.services import stop_process
from tests.support.topic_api import ApiStack, SseReader, fleet
from tests.support.waiting import wait_for

pytestmark = pytest.mark.mqtt
T = Topics()
DEBOUNCE_MS = 4000


@dataclass
class Running:
    """A slow-snapshot API stack over a fleet of one node (two items), its broker writer and
    an open event stream (after its hello)."""

    writer: MqttClient
    stack: ApiStack
    reader: SseReader
    snapshot: Path


@pytest.fixture
def running(tmp_path: Path) -> Iterator[Running]:
    broker = Mosquitto().start()
    writer = MqttClient(MqttSettings(url=broker.url), "notices-writer")
    stack = ApiStack(
        broker.url,
        tmp_path,
        PHRAME_MIRROR_DEBOUNCE_MS=str(DEBOUNCE_MS),
        PHRAME_MIRROR_MAX_DELAY_MS=str(2 * DEBOUNCE_MS),
    )
    reader = None
    try:
        writer.start(timeout=5)
        writer.publish_batch(fleet(["tell-1"], 2).items(), timeout=10)
        stack.start()
        stack.wait_json("/healthz", lambda d: all(d["snapshots"].values()), "both snapshots read", 30)
        stack.wait_json("/api/nodes", lambda d: [n["node"] for n in d["nodes"]] == ["tell-1"], "the node", 30)
        reader = SseReader(stack.url + "/api/events")
        reader.next("hello")
        yield Running(writer, stack, reader, tmp_path / "mirror" / "actual.json")
    finally:
        if reader is not None:
            reader.close()
        stack.stop()
        writer.stop()
        broker.stop()


def test_a_change_reaches_the_event_stream_before_the_debounced_snapshot(running: Running):
    stack, snapshot = running.stack, running.snapshot
    written_before = snapshot.stat().st_mtime_ns
    topic = T.actual_item("tell-1", "containers", "demo.svc0.0")
    doc = {"state": "exited", "exit_code": 7, "restart_count": 1}
    sent = time.monotonic()
    running.writer.publish(topic, json.dumps(doc).encode())
    change, arrived = running.reader.next("change", DEBOUNCE_MS / 1000, lambda d: topic in d["changed"])
    assert change["plane"] == "actual" and arrived - sent < DEBOUNCE_MS / 1000, arrived - sent
    assert snapshot.stat().st_mtime_ns == written_before, f"the snapshot was written: {stack.logs()}"
    assert exit_code(stack) == 7
    # the snapshot holding it comes after the debounce; read (on its notice), it keeps the change
    reads = snapshot_reads(stack)
    stack.wait_json("/healthz", lambda _: snapshot_reads(stack) > reads, "the snapshot read", 15)
    assert snapshot.stat().st_mtime_ns != written_before and exit_code(stack) == 7


def test_the_api_hears_a_restarted_mirror_again(running: Running):
    """The actual mirror stops and runs again (a new run, a new socket): the API polls the
    files meanwhile, connects to the new mirror and is told of its changes at once again."""
    stack, snapshot, reader = running.stack, running.snapshot, running.reader
    old_run = json.loads(snapshot.read_text())["instance"]
    stop_process(stack.procs["mirror-actual"])
    assert not (snapshot.parent / "actual.sock").exists()  # it took its socket along
    stack._spawn("mirror-actual", "mirror", "--plane", "actual")
    # the new run's first snapshot comes after its debounce; the API reads it (an event)
    wait_for(lambda: json.loads(snapshot.read_text())["instance"] != old_run, "the new run's snapshot", 30)
    written = datetime.fromisoformat(json.loads(snapshot.read_text())["generated_at"]).timestamp()
    reader.next("change", 10, lambda d: d["plane"] == "actual" and d["generated_at"] == written)
    topic = T.actual_item("tell-1", "containers", "demo.svc1.0")
    sent = time.monotonic()
    running.writer.publish(topic, json.dumps({"state": "exited", "exit_code": 9}).encode())
    _, arrived = reader.next("change", DEBOUNCE_MS / 1000, lambda d: topic in d["changed"])
    assert arrived - sent < DEBOUNCE_MS / 1000, arrived - sent


def exit_code(stack: ApiStack) -> object:
    items = stack.json("/api/nodes/tell-1")["items"]
    (item,) = [i for i in items if i["id"] == "demo.svc0.0"]
    return (item.get("actual") or {}).get("exit_code")


def snapshot_reads(stack: ApiStack) -> float:
    text = stack.get("/metrics", headers=stack.headers()).text
    lines = [
        line
        for line in text.splitlines()
        if line.startswith('phrame_topic_api_snapshot_reads_total{plane="actual"}')
    ]
    return float(lines[0].split()[-1]) if lines else 0.0
