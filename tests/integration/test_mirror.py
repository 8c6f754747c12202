"""The mirror against a real mosquitto: debounced snapshots of a 10,000-update burst, clears,
atomic files under a polling reader, and a full disk (a 64 KiB tmpfs) that keeps the last good file.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from phrame.mqtt import MqttClient, MqttSettings
from tests.support.mirror import mirror_settings, running_mirror
from tests.support.mosquitto import Mosquitto
from tests.support.services import free_port
from tests.support.waiting import wait_for

pytestmark = pytest.mark.mqtt
PREFIX = "phrame/actual"
BURST_QUEUE = "max_queued_messages 20000"


def client(url: str, cid: str, clients: list[MqttClient]) -> MqttClient:
    c = MqttClient(MqttSettings(url=url, reconnect_max_s=1), cid)
    c.start(timeout=5)
    clients.append(c)
    return c


def read(path: Path) -> dict:
    return json.loads(path.read_text())


def snapshot_has(path: Path, topics: dict) -> bool:
    try:
        return path.exists() and read(path)["topics"] == topics
    except ValueError:
        return False


@pytest.fixture
def deep_broker() -> Iterator[Mosquitto]:
    """mosquitto queueing a whole burst per client: its default (1,000 queued, 20 in flight)
    drops what the mirror's connection has not drained yet (docs/services/mirror.md)."""
    broker = Mosquitto([BURST_QUEUE]).start()
    yield broker
    proc = broker.proc
    broker.stop()
    if proc is not None and proc.stderr is not None:
        proc.stderr.close()


@pytest.mark.slow
def test_burst_is_debounced_and_the_last_snapshot_is_the_retained_state(
    deep_broker: Mosquitto, clients: list, tmp_path: Path
) -> None:
    mosquitto = deep_broker
    settings = mirror_settings(mosquitto.url, tmp_path / "snap", debounce_s=0.25, max_delay_s=2.0)
    writer = client(mosquitto.url, "writer", clients)
    path = settings.snapshot_path
    torn: list[str] = []
    stop = threading.Event()

    def poll() -> None:  # a reader during the burst: every read must parse
        while not stop.wait(0.002):  # a busy reader, but not one that starves the others of the GIL
            try:
                text = path.read_text()
            except FileNotFoundError:
                continue
            try:
                json.loads(text)
            except ValueError:
                torn.append(text[-80:])

    with running_mirror(settings) as loop:
        reader = threading.Thread(target=poll)
        reader.start()
        try:
            started = time.monotonic()
            for batch in range(10):  # 10,000 retained updates over 1,000 topics
                writer.publish_batch(
                    [
                        (f"{PREFIX}/nodes/n{i % 1000}/items/x", json.dumps({"v": batch * 1000 + i}).encode())
                        for i in range(1000)
                    ]
                )
            writer.publish_batch([(f"{PREFIX}/nodes/n7/items/x", b"not json{")])
            duration = time.monotonic() - started
            retained = client(mosquitto.url, "checker", clients).collect_retained(f"{PREFIX}/#", settle=0.3)
            expected = {t: json.loads(p) for t, p in retained.items() if t != f"{PREFIX}/nodes/n7/items/x"}
            wait_for(
                lambda: snapshot_has(path, expected),
                "the snapshot to equal the broker's retained state",
                10,
                observe=lambda: (loop.messages, len(retained), len(read(path)["topics"]), loop.writer.writes),
            )
            wait_for(lambda: loop.messages >= 10_001 and not loop._first_unflushed, "the last flush", 5)
        finally:
            stop.set()
            reader.join()
        writes = loop.writer.writes
    assert len(expected) == 999
    snap = read(path)
    assert snap["plane"] == "actual" and snap["generated_at"]
    assert snap["invalid"][f"{PREFIX}/nodes/n7/items/x"]["raw"] == "not json{"
    assert writes <= duration / 0.25 + 2, (writes, duration)
    assert torn == []


def test_a_retained_clear_removes_the_topic(mosquitto: Mosquitto, clients: list, tmp_path: Path) -> None:
    settings = mirror_settings(mosquitto.url, tmp_path, debounce_s=0.05, max_delay_s=0.5)
    writer = client(mosquitto.url, "writer", clients)
    writer.publish_batch([(f"{PREFIX}/a", b'{"x":1}'), (f"{PREFIX}/b", b'"keep"')])
    with running_mirror(settings):
        wait_for(
            lambda: snapshot_has(settings.snapshot_path, {f"{PREFIX}/a": {"x": 1}, f"{PREFIX}/b": "keep"}),
            "both",
            5,
        )
        writer.publish_batch([(f"{PREFIX}/a", None)])
        wait_for(lambda: snapshot_has(settings.snapshot_path, {f"{PREFIX}/b": "keep"}), "the clear", 5)


def test_a_command_reply_is_no_state_and_is_left_out(
    mosquitto: Mosquitto, clients: list, tmp_path: Path
) -> None:
    """An agent's answer to a log command (not retained, on its actual subtree) is for whoever
    asked: the snapshot never holds it, while a report after it is mirrored as usual."""
    settings = mirror_settings(mosquitto.url, tmp_path, debounce_s=0.05, max_delay_s=0.5)
    writer = client(mosquitto.url, "writer", clients)
    reply = {
        "id": "c1",
        "node": "n1",
        "item": "demo.web.0",
        "at": 1.0,
        "lines": ["secret-ish"],
        "truncated": False,
    }
    with running_mirror(settings) as mirror:
        writer.publish_batch([(f"{PREFIX}/nodes/n1/replies/c1", json.dumps(reply).encode())], retain=False)
        writer.publish_batch([(f"{PREFIX}/nodes/n1/status", b'{"state":"online"}')])
        wait_for(
            lambda: snapshot_has(settings.snapshot_path, {f"{PREFIX}/nodes/n1/status": {"state": "online"}}),
            "the status alone",
            5,
        )
        assert mirror.messages == 1, "the reply was counted as a change"


@pytest.fixture
def tiny_disk(tmp_path: Path) -> Iterator[Path]:
    folder = tmp_path / "tiny"
    folder.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a 64 KiB tmpfs needs root")
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(folder)], capture_output=True
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode().strip()}")
    try:
        yield folder
    finally:
        subprocess.run(["umount", str(folder)], check=True)


def test_a_full_disk_is_reported_once_and_the_last_good_snapshot_stays(
    mosquitto: Mosquitto, clients: list, tiny_disk: Path, caplog: pytest.LogCaptureFixture
) -> None:
    settings = mirror_settings(mosquitto.url, tiny_disk, debounce_s=0.05, max_delay_s=0.5)
    writer = client(mosquitto.url, "writer", clients)
    good = {f"{PREFIX}/small": {"ok": True}}
    writer.publish_batch([(f"{PREFIX}/small", b'{"ok": true}')])
    caplog.set_level(logging.INFO, logger="mirror")
    with running_mirror(settings) as loop:
        wait_for(lambda: snapshot_has(settings.snapshot_path, good), "the first good snapshot", 5)
        big = json.dumps("x" * 20_000).encode()  # 5 x 20 KB > the 64 KiB disk
        writer.publish_batch([(f"{PREFIX}/big{i}", big) for i in range(5)])
        wait_for(lambda: loop.writer.failures >= 2, "failed writes (retried)", 5)
        assert read(settings.snapshot_path)["topics"] == good  # the last good one, intact
        # no temp file left (one of a retry under way is gone a moment later); the notice
        # socket aside
        wait_for(
            lambda: [p.name for p in tiny_disk.iterdir() if p.suffix != ".sock"] == ["actual.json"],
            "no temp file left",
            5,
        )
        writer.publish_batch([(f"{PREFIX}/big{i}", None) for i in range(5)])  # space again
        wait_for(
            lambda: snapshot_has(settings.snapshot_path, good) and loop.writer.last_error is None,
            "recovery",
            5,
        )
    errors = [
        r for r in caplog.records if r.levelno == logging.ERROR and "cannot write snapshot" in r.getMessage()
    ]
    assert len(errors) == 1, [r.getMessage() for r in errors]
    assert "No space left" in errors[0].getMessage()


def test_the_command_mirrors_a_plane_and_flushes_on_sigterm(
    mosquitto: Mosquitto, clients: list, tmp_path: Path
) -> None:
    writer = client(mosquitto.url, "writer", clients)
    writer.publish_batch([("phrame/desired/nodes/a/manifest", b'{"items":[]}'), (f"{PREFIX}/x", b"1")])
    env = {
        **os.environ,
        "PHRAME_DESIRED_MQTT_URL": mosquitto.url,
        "PHRAME_STATE_DIR": str(tmp_path / "state"),
        "PHRAME_MIRROR_DEBOUNCE_MS": "50",
    }
    cmd = [sys.executable, "-m", "phrame", "mirror", "--plane", "desired"]
    proc = subprocess.Popen(cmd, env=env, stderr=subprocess.PIPE, cwd=Path(__file__).parents[2])
    path = tmp_path / "state" / "mirror" / "desired.json"
    try:
        wait_for(
            lambda: snapshot_has(path, {"phrame/desired/nodes/a/manifest": {"items": []}}), "the snapshot", 10
        )
        assert (path.parent.stat().st_mode & 0o777, path.stat().st_mode & 0o777) == (0o700, 0o600)
    finally:
        proc.terminate()
        _, err = proc.communicate(timeout=10)
    assert proc.returncode == 0, err.decode()


def test_the_command_refuses_bad_settings() -> None:
    env = {**os.environ, "PHRAME_MIRROR_DEBOUNCE_MS": "500", "PHRAME_MIRROR_MAX_DELAY_MS": "100"}
    done = subprocess.run(
        [sys.executable, "-m", "phrame", "mirror", "--plane", "actual"],
        env=env,
        capture_output=True,
        timeout=30,
    )
    assert done.returncode == 2
    assert b"PHRAME_MIRROR_MAX_DELAY_MS (100) must be at least PHRAME_MIRROR_DEBOUNCE_MS (500)" in done.stderr


def test_a_reader_polling_during_many_writes_never_sees_a_half_written_file(
    deep_broker: Mosquitto, clients: list, tmp_path: Path
) -> None:
    # a tiny window: many writes of a ~0.5 MB file while the reader polls
    settings = mirror_settings(deep_broker.url, tmp_path, debounce_s=0.005, max_delay_s=0.02)
    writer = client(deep_broker.url, "writer", clients)
    path, reads, torn = settings.snapshot_path, [0], []
    stop = threading.Event()

    def poll() -> None:
        while not stop.wait(0.001):
            try:
                text = path.read_text()
            except FileNotFoundError:
                continue
            reads[0] += 1
            try:
                json.loads(text)
            except ValueError:
                torn.append(len(text))

    with running_mirror(settings) as loop:
        reader = threading.Thread(target=poll)
        reader.start()
        try:
            for batch in range(3):
                writer.publish_batch(
                    [
                        (f"{PREFIX}/t{i}", json.dumps({"v": batch, "pad": "p" * 200}).encode())
                        for i in range(1000)
                    ]
                )
            wait_for(
                lambda: loop.messages >= 3000 and loop.writer.writes >= 10,
                "many writes",
                10,
                observe=lambda: loop.writer.writes,
            )
        finally:
            stop.set()
            reader.join()
    assert reads[0] >= 10
    assert torn == [], f"{len(torn)} of {reads[0]} reads were half-written"


def test_sigterm_while_waiting_for_the_broker_ends_the_command(tmp_path: Path) -> None:
    env = {
        **os.environ,
        "PHRAME_ACTUAL_MQTT_URL": f"mqtt://127.0.0.1:{free_port()}",  # nobody listens
        "PHRAME_MIRROR_DIR": str(tmp_path / "m"),
    }
    cmd = [sys.executable, "-m", "phrame", "mirror", "--plane", "actual"]
    proc = subprocess.Popen(cmd, env=env, stderr=subprocess.PIPE, cwd=Path(__file__).parents[2])
    try:
        wait_for(lambda: (tmp_path / "m").is_dir(), "the mirror to start (its folder)", 10)
        proc.terminate()
        _, err = proc.communicate(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, err.decode()
