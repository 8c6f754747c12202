"""``phrame status`` against a real mosquitto holding retained node and environment topics."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
import time

import pytest

from phrame.mqtt import MqttClient, MqttSettings
from schemas import Topics, canonical_json
from tests.support.mosquitto import Mosquitto

T = Topics()
HOST = dict.fromkeys(["cpu_percent", "load1", "mem_total", "mem_used", "disk_total", "disk_used"], 1)


def heartbeat(ts: float, interval_s: float = 5) -> bytes:
    return canonical_json({"ts": ts, "seq": 1, "interval_s": interval_s, "host": HOST})


def run_status(
    url: str,
    extra_env: dict[str, str] | None = None,
    *,
    json_out: bool = True,
    timeout: float = 3,
    args: tuple[str, ...] = (),
) -> subprocess.CompletedProcess[str]:
    """``timeout``: ``--timeout``, also how long it listens for live heartbeats; these tests'
    nodes do not beat, so (below 1.5 intervals + 1 s) they are judged by their own ``ts``."""
    env = {**os.environ, "PHRAME_DESIRED_MQTT_URL": url, **(extra_env or {})}
    env.pop("PHRAME_ACTUAL_MQTT_URL", None)
    return subprocess.run(
        [sys.executable, "-m", "phrame", "status", *(["--json"] if json_out else []), "--timeout", str(timeout), *args],
        env=env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip


@pytest.mark.slow
def test_status_reads_the_fleet_and_sets_the_exit_code(mosquitto: Mosquitto) -> None:
    client = MqttClient(MqttSettings(url=mosquitto.url), "test-status-writer")
    client.start(timeout=5)
    try:
        client.publish_batch([
            (T.status("edge-01"), canonical_json({"state": "online", "converged": True, "generation": 2, "commit": "c1"})),
            (T.heartbeat("edge-01"), heartbeat(time.time())),
            (T.env_sync("studio-a"), canonical_json({"environment": "studio-a", "ref": "main", "ok": True,
                                                     "last_applied": {"commit": "c1"}})),
        ])  # fmt: skip
        ok = run_status(mosquitto.url)
        assert ok.returncode == 0, ok.stderr
        doc = json.loads(ok.stdout)
        assert doc["healthy"] and doc["nodes"][0]["node"] == "edge-01"
        assert doc["environments"][0]["last_applied"] == "c1"
        client.publish_batch([(T.status("edge-02"), canonical_json({"state": "offline", "ts": time.time()}))])
        bad = run_status(mosquitto.url)
        assert bad.returncode == 1
        assert {n["node"]: n["state"] for n in json.loads(bad.stdout)["nodes"]} == {
            "edge-01": "online", "edge-02": "offline"}  # fmt: skip
    finally:
        client.stop()


@pytest.mark.slow
def test_status_shows_the_environment_commit_and_which_nodes_applied_it(mosquitto: Mosquitto) -> None:
    """Over a real broker: manifests (desired plane) against statuses."""
    old, new = "a" * 40, "b" * 40
    digest = "sha256:" + "0" * 64

    def manifest(generation: int, commit: str, item: str) -> bytes:
        return canonical_json({"generation": generation, "commit": commit, "items": {item: digest}})

    client = MqttClient(MqttSettings(url=mosquitto.url), "test-status-writer")
    client.start(timeout=5)
    try:
        client.publish_batch([
            (T.manifest("edge-01"), manifest(2, old, "containers/studio-a.tams.0")),  # untouched by new
            (T.manifest("edge-02"), manifest(3, new, "containers/studio-a.mixer.0")),
            (T.status("edge-01"), canonical_json({"state": "online", "converged": True, "generation": 2, "commit": old})),
            (T.status("edge-02"), canonical_json({"state": "online", "converged": True, "generation": 2, "commit": old})),
            (T.heartbeat("edge-01"), heartbeat(time.time())),
            (T.heartbeat("edge-02"), heartbeat(time.time())),
            (T.env_sync("studio-a"), canonical_json({"environment": "studio-a", "ref": "main", "ok": True,
                                                     "last_applied": {"commit": new}})),
        ])  # fmt: skip
        behind = run_status(mosquitto.url)
        assert behind.returncode == 1, behind.stderr
        doc = json.loads(behind.stdout)
        assert {n["node"]: n["applied"] for n in doc["nodes"]} == {"edge-01": True, "edge-02": False}
        (env,) = doc["environments"]
        assert (env["commit"], env["nodes"], env["not_applied"]) == (new, ["edge-01", "edge-02"], ["edge-02"])
        status = canonical_json({"state": "online", "converged": True, "generation": 3, "commit": new})
        client.publish_batch([(T.status("edge-02"), status)])
        done = run_status(mosquitto.url)
        assert done.returncode == 0, done.stdout
        assert json.loads(done.stdout)["environments"][0]["not_applied"] == []
    finally:
        client.stop()


@pytest.mark.slow
def test_a_node_online_by_its_status_but_with_a_stale_heartbeat_shows_offline(mosquitto: Mosquitto) -> None:
    """One node-health rule. The retained status says online, the retained
    heartbeat is older than PHRAME_NODE_TIMEOUT_S: ``phrame status`` says offline and why."""
    client = MqttClient(MqttSettings(url=mosquitto.url), "test-status-writer")
    client.start(timeout=5)
    status = canonical_json({"state": "online", "converged": True, "generation": 1, "commit": "c1"})
    try:
        client.publish_batch([
            (T.status("edge-01"), status),
            (T.heartbeat("edge-01"), heartbeat(time.time() - 2)),
            (T.status("edge-02"), status),
            (T.heartbeat("edge-02"), heartbeat(time.time() - 45)),
        ])  # fmt: skip
        done = run_status(mosquitto.url, {"PHRAME_NODE_TIMEOUT_S": "20"})
        assert done.returncode == 1, done.stdout + done.stderr
        nodes = {n["node"]: n for n in json.loads(done.stdout)["nodes"]}
        assert (nodes["edge-01"]["state"], nodes["edge-02"]["state"]) == ("online", "offline")
        silent = re.fullmatch(r"no heartbeat for (\d+) s", nodes["edge-02"]["reason"])
        assert silent and int(silent[1]) >= 45, nodes["edge-02"]
        text = run_status(mosquitto.url, {"PHRAME_NODE_TIMEOUT_S": "20"}, json_out=False).stdout
        assert "edge-02         offline" in text and "    offline: no heartbeat for " in text, text
        # a longer timeout: the same heartbeat is recent enough
        assert run_status(mosquitto.url, {"PHRAME_NODE_TIMEOUT_S": "600"}).returncode == 0
    finally:
        client.stop()


@pytest.mark.slow
def test_a_node_whose_clock_is_10_minutes_off_is_online_and_a_silent_one_goes_offline(
    mosquitto: Mosquitto,
) -> None:
    """Fault case 7: liveness on the reader's clock. Two nodes beat live every 0.5 s with
    ``ts`` 600 s behind and 600 s ahead of this host: both online, their offsets said. A third
    node went silent with a heartbeat dated 600 s ahead: offline once silent for longer than
    the timeout on this host's clock, never online by its own."""
    client = MqttClient(MqttSettings(url=mosquitto.url), "test-status-skewed-nodes")
    client.start(timeout=5)
    status = canonical_json({"state": "online", "converged": True, "generation": 1, "commit": "c1"})
    stop = threading.Event()

    def beat() -> None:
        while not stop.is_set():
            for node, skew in (("behind", -600.0), ("ahead", 600.0)):
                client.publish(T.heartbeat(node), heartbeat(time.time() + skew, interval_s=0.5))
            stop.wait(0.5)

    try:
        client.publish_batch([(T.status(n), status) for n in ("behind", "ahead", "silent")])
        client.publish_batch([(T.heartbeat("silent"), heartbeat(time.time() + 600, interval_s=0.5))])
        beater = threading.Thread(target=beat, daemon=True)
        beater.start()
        started = time.monotonic()
        done = run_status(mosquitto.url, {"PHRAME_NODE_TIMEOUT_S": "2"}, timeout=5)
        took = time.monotonic() - started
        nodes = {n["node"]: n for n in json.loads(done.stdout)["nodes"]}
        assert {n: row["state"] for n, row in nodes.items()} == {
            "behind": "online", "ahead": "online", "silent": "offline"}, nodes  # fmt: skip
        assert done.returncode == 1  # the silent node needs attention
        assert nodes["behind"]["clock_offset_s"] == pytest.approx(-600, abs=2)
        assert nodes["ahead"]["clock_offset_s"] == pytest.approx(600, abs=2)
        assert nodes["silent"]["reason"].startswith("no heartbeat for "), nodes["silent"]
        assert took < 15, took  # listened past the 2 s timeout, not longer than --timeout 5
        text = run_status(mosquitto.url, {"PHRAME_NODE_TIMEOUT_S": "2"}, json_out=False, timeout=5).stdout
        assert re.search(r"^behind +online", text, re.M) and "clock 600 s behind this host" in text, text
        assert "clock 600 s ahead of this host" in text, text
    finally:
        stop.set()
        client.stop()


@pytest.mark.slow
def test_status_without_a_broker_exits_2() -> None:
    from tests.support.services import free_port

    done = run_status(f"mqtt://127.0.0.1:{free_port()}")
    assert done.returncode == 2
    assert "cannot read the broker" in done.stderr


def test_a_bad_node_timeout_exits_2_naming_it() -> None:
    from tests.support.services import free_port

    done = run_status(f"mqtt://127.0.0.1:{free_port()}", {"PHRAME_NODE_TIMEOUT_S": "soon"})
    assert done.returncode == 2
    assert "PHRAME_NODE_TIMEOUT_S='soon' is not a number" in done.stderr


def test_one_login_reads_both_planes_of_one_broker() -> None:
    """The generated broker config makes the user name the client id: two connections as
    ``observer`` (one per plane) threw each other off ("disconnected ... reconnecting")."""
    broker = Mosquitto(["use_username_as_clientid true"]).start()
    writer = MqttClient(MqttSettings(url=broker.url, username="writer"), "test-status-writer")
    writer.start(timeout=5)
    try:
        writer.publish_batch([
            (T.status("edge-01"), canonical_json({"state": "online", "converged": True, "generation": 2, "commit": "c1"})),
            (T.heartbeat("edge-01"), heartbeat(time.time())),
        ])  # fmt: skip
        done = run_status(broker.url, {"PHRAME_MQTT_USERNAME": "observer"}, timeout=3)
        assert done.returncode == 0, done.stderr
        assert "disconnected" not in done.stderr, done.stderr
        assert json.loads(done.stdout)["nodes"][0]["state"] == "online"
    finally:
        writer.stop()
        broker.stop()
        if broker.proc is not None and broker.proc.stderr is not None:
            broker.proc.stderr.close()


@pytest.mark.slow
def test_status_of_one_node_shows_its_failing_containers_last_lines(mosquitto: Mosquitto) -> None:
    client = MqttClient(MqttSettings(url=mosquitto.url), "test-status-logs")
    client.start(timeout=5)
    try:
        tail = {"lines": ["starting", "boom: no database"], "truncated": False}
        client.publish_batch([
            (T.status("edge-01"), canonical_json({"state": "online", "converged": True, "generation": 2, "commit": "c1"})),
            (T.heartbeat("edge-01"), heartbeat(time.time())),
            (T.actual_item("edge-01", "containers", "lab.db.0"), canonical_json({"state": "exited", "logs": tail})),
        ])  # fmt: skip
        text = run_status(mosquitto.url, json_out=False, args=("--node", "edge-01"))
        assert "lab.db.0: its last 2 line(s)" in text.stdout and "    boom: no database" in text.stdout, text
        doc = json.loads(run_status(mosquitto.url, args=("--node", "edge-01")).stdout)
        assert doc["node"] == "edge-01" and doc["logs"] == {"lab.db.0": tail["lines"]}
        missing = run_status(mosquitto.url, args=("--node", "edge-09"))
        assert (
            missing.returncode == 2 and "no node 'edge-09'" in missing.stderr and "edge-01" in missing.stderr
        )
    finally:
        client.stop()
