"""Two real ``python -m placement`` processes sharing PHRAME_LOCK_FILE: exactly one acts,
the other stands by and takes over within a second when the first is SIGKILLed (by pid).
Real mosquitto carries the heartbeats the test publishes; real git holds the commits."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from phrame.mqtt import MqttClient, MqttSettings
from placement.lock import ProcessLock
from schemas import Topics
from tests.integration.test_placement_git import NODES, ConfigRemote
from tests.integration.test_placement_loop import heartbeat
from tests.support.mosquitto import Mosquitto
from tests.support.services import wait_until
from tests.support.waiting import wait_for

ROOT = Path(__file__).resolve().parents[2]
TOPICS = Topics("phrame")


class Heartbeats:
    """Every node agent, as a thread publishing retained heartbeats for the nodes in ``alive``."""

    def __init__(self, url: str) -> None:
        self.alive = set(NODES)
        self.client = MqttClient(MqttSettings(url=url), "test-heartbeats")
        self.client.start()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        seq = 0
        while not self._stop.wait(0.2):
            seq += 1
            for node in sorted(self.alive):
                self.client.publish(TOPICS.heartbeat(node), heartbeat(time.time(), seq))

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)
        self.client.stop()


class Instance:
    def __init__(self, tmp: Path, name: str, env: dict[str, str]) -> None:
        self.log = tmp / f"{name}.log"
        with self.log.open("wb") as out:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "placement"],
                cwd=ROOT,
                # faulthandler: a SIGABRT dumps every thread's stack into the log (see terminate)
                env=env | {"PHRAME_STATE_DIR": str(tmp / f"state-{name}"), "PYTHONFAULTHANDLER": "1"},
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        self.owner = f"{os.uname().nodename}/{self.proc.pid}"

    def text(self) -> str:
        return self.log.read_text(errors="replace")

    def terminate(self, timeout: float = 10.0) -> int:
        """SIGTERM, and the exit code; one that does not end in ``timeout`` fails the test
        with its log and the stacks of all its threads (where it hangs)."""
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.send_signal(signal.SIGABRT)
            self.proc.wait(10)
            pytest.fail(f"no exit {timeout:g} s after SIGTERM; its log and stacks:\n{self.text()}")

    def end(self) -> None:
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait(10)


@pytest.fixture
def instances() -> Iterator[list[Instance]]:
    started: list[Instance] = []
    yield started
    for inst in started:
        inst.end()


def trailers(remote: ConfigRemote) -> list[str]:
    out = subprocess.run(
        [
            "git",
            "--git-dir",
            str(remote.bare),
            "log",
            "--format=%(trailers:key=Placement-By,valueonly)",
            "main",
        ],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return [line for line in out.splitlines() if line.strip()]


@pytest.mark.slow
def test_two_instances_one_acts_the_other_takes_over_when_it_is_killed(
    mosquitto: Mosquitto, tmp_path: Path, instances: list[Instance]
) -> None:
    remote = ConfigRemote(tmp_path)
    lock_file = tmp_path / "placement.lock"
    env = dict(os.environ) | {
        "PHRAME_REPO_URL": str(remote.bare),
        "PHRAME_DESIRED_MQTT_URL": mosquitto.url,
        "PHRAME_LOCK_FILE": str(lock_file),
        "PHRAME_PLACEMENT_INTERVAL_S": "0.2",
        "PHRAME_NODE_TIMEOUT_S": "1",
        "PHRAME_RESCHEDULE_AFTER_S": "0.5",
    }
    beats = Heartbeats(mosquitto.url)
    try:
        a = Instance(tmp_path, "a", env)
        instances.append(a)
        wait_until(lambda: trailers(remote) == [a.owner], "instance a's first commit")
        assert lock_file.read_text().strip() == a.owner

        b = Instance(tmp_path, "b", env)
        instances.append(b)
        wait_until(lambda: "standing by" in b.text(), "instance b standing by")
        # both running, and there is something to decide (edge-02 goes silent): only a decides
        beats.alive.discard("edge-02")
        wait_until(lambda: len(trailers(remote)) == 2, "a's second commit", timeout=15)
        assert trailers(remote) == [a.owner, a.owner]
        assert "edge-02 offline" in remote.message()
        assert lock_file.read_text().strip() == a.owner
        assert "is active" in a.text() and "is active" not in b.text()

        # how fast b takes over is a benchmark's figure; here: that it does, because a died
        os.kill(a.proc.pid, signal.SIGKILL)
        a.proc.wait(10)
        wait_until(lambda: lock_file.read_text().strip() == b.owner, "b takes the lock", timeout=5)
        wait_until(lambda: "is active" in b.text(), "b active", timeout=5)

        # b now acts: edge-02 is back, edge-03 goes silent and b moves its replica
        beats.alive.add("edge-02")
        beats.alive.discard("edge-03")
        wait_until(lambda: len(trailers(remote)) == 3, "b's commit", timeout=15)
        assert trailers(remote) == [b.owner, a.owner, a.owner]
        assert "edge-03 offline" in remote.message()
        assert "edge-03" not in remote.node_json()["assignments"]["mixer"]

        assert b.terminate() == 0
    finally:
        beats.stop()


def test_lock_is_exclusive_and_released(tmp_path: Path) -> None:
    path = tmp_path / "lock"
    first = ProcessLock(path, owner="one")
    second = ProcessLock(path, owner="two", poll_s=0.01)
    assert first.try_acquire() and first.is_held
    assert not second.try_acquire() and second.holder() == "one"
    stop = threading.Event()
    got: list[bool] = []
    tries: list[bool] = []
    attempt = second.try_acquire

    def counted() -> bool:  # the real attempt, counted: "still standing by" after known tries
        tries.append(attempt())
        return tries[-1]

    second.try_acquire = counted  # type: ignore[method-assign]
    waiter = threading.Thread(target=lambda: got.append(second.acquire(stop)))
    waiter.start()
    wait_for(lambda: len(tries) >= 3, "three attempts of the standing-by lock", observe=lambda: tries)
    assert got == [] and not any(tries)  # still standing by
    first.release()
    waiter.join(2)
    assert got == [True] and second.holder() == "two"
    stop.set()
    third = ProcessLock(path, owner="three", poll_s=0.01)
    stop_now = threading.Event()
    stop_now.set()
    assert third.acquire(stop_now) is False  # stopped while standing by
    second.release()


@pytest.mark.slow
def test_an_instance_started_before_its_broker_waits_then_places(
    mosquitto: Mosquitto, tmp_path: Path, instances: list[Instance]
) -> None:
    mosquitto.stop()
    remote = ConfigRemote(tmp_path)
    env = dict(os.environ) | {
        "PHRAME_REPO_URL": str(remote.bare),
        "PHRAME_DESIRED_MQTT_URL": mosquitto.url,
        "PHRAME_PLACEMENT_INTERVAL_S": "0.2",
        "PHRAME_MQTT_NO_CONNECTION_WARN_S": "0.5",
    }
    a = Instance(tmp_path, "a", env)
    instances.append(a)
    # the warning is only given by a start without a deadline: seeing it shows placement waits
    wait_for(
        lambda: "still no connection" in a.text(), "the 'still no connection' warning", 8, observe=a.text
    )
    assert a.proc.poll() is None, f"placement gave up without a broker:\n{a.text()}"
    mosquitto.start()
    beats = Heartbeats(mosquitto.url)
    try:
        wait_until(lambda: trailers(remote) == [a.owner], "the first placement commit", timeout=20)
    finally:
        beats.stop()
    a.proc.send_signal(signal.SIGTERM)
    assert a.proc.wait(10) == 0


def test_sigterm_while_waiting_for_the_broker_ends_placement_cleanly(
    mosquitto: Mosquitto, tmp_path: Path, instances: list[Instance]
) -> None:
    mosquitto.stop()
    env = dict(os.environ) | {
        "PHRAME_REPO_URL": str(ConfigRemote(tmp_path).bare),
        "PHRAME_DESIRED_MQTT_URL": mosquitto.url,
    }
    a = Instance(tmp_path, "a", env)
    instances.append(a)
    wait_for(lambda: "cannot connect" in a.text(), "placement trying the broker", 10, observe=a.text)
    a.proc.send_signal(signal.SIGTERM)
    assert a.proc.wait(5) == 0, a.text()
    assert "stopped before it reached the broker" in a.text()
