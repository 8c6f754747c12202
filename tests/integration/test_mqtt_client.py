"""The shared MQTT client against a real mosquitto: reconnect, resubscribe, batches, wills.

Plain-listener brokers from :mod:`tests.support.mosquitto`; the security listeners are
covered in ``test_mqtt_security.py`` and ``test_broker_config.py``. Every wait is bounded.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from phrame.mqtt import Message, MqttClient, MqttError, MqttSettings, PublishTimeout, Will
from tests.support.mosquitto import Mosquitto
from tests.support.mqtt import Inbox
from tests.support.services import eventually, free_port, wait_for_port
from tests.support.tcp_proxy import PartitionProxy
from tests.support.waiting import wait_for

pytestmark = pytest.mark.mqtt
ROOT = Path(__file__).parents[2]


@pytest.fixture
def broker() -> Iterator[Mosquitto]:
    m = Mosquitto().start()
    yield m
    m.stop()


def settings(url: str, **kw: object) -> MqttSettings:
    return MqttSettings(url=url, reconnect_max_s=1, **kw)  # type: ignore[arg-type]


def connect(clients: list[MqttClient], s: MqttSettings, cid: str, **kw: object) -> MqttClient:
    client = MqttClient(s, cid, **kw)  # type: ignore[arg-type]
    client.start(timeout=5)
    clients.append(client)
    return client


def test_publish_batch_then_collect_retained_omits_cleared(broker: Mosquitto, clients: list) -> None:
    c = connect(clients, settings(broker.url), "writer")
    c.publish_batch([("p/a", b"1"), ("p/b/c", b"2"), ("p/d", b"3"), ("other/x", b"4")])
    c.publish_batch([("p/d", None)])  # cleared
    reader = connect(clients, settings(broker.url), "reader")
    assert reader.collect_retained("p/#", settle=0.2) == {"p/a": b"1", "p/b/c": b"2"}
    assert reader.collect_retained("nothing/#", settle=0.1) == {}


def test_collect_retained_settles_while_retained_heartbeats_keep_coming(
    broker: Mosquitto, clients: list
) -> None:
    reader = connect(clients, settings(broker.url), "reader")
    agent = connect(clients, settings(broker.url), "agent")
    agent.publish_batch([("phrame/actual/nodes/a/status", b'{"state":"online"}')])
    stop = threading.Event()
    beats: list[int] = []

    def beat() -> None:  # retained heartbeats every 50 ms, as a busy fleet sends them
        for i in range(400):
            if stop.wait(0.05):
                return
            agent.publish("phrame/actual/nodes/a/heartbeat", str(i).encode())
            beats.append(i)

    beater = threading.Thread(target=beat)
    beater.start()
    try:
        wait_for(lambda: len(beats) >= 3, "the heartbeats to flow", 5)  # collected while they keep coming
        got = reader.collect_retained("phrame/actual/#", settle=0.3, timeout=5)
    finally:
        stop.set()
        beater.join()
    assert got["phrame/actual/nodes/a/status"] == b'{"state":"online"}'
    assert "phrame/actual/nodes/a/heartbeat" in got


def test_collect_retained_leaves_permanent_subscription_working(broker: Mosquitto, clients: list) -> None:
    c = connect(clients, settings(broker.url), "both")
    inbox = Inbox()
    c.subscribe("q/#", inbox)
    c.publish_batch([("q/1", b"one")])
    assert inbox.wait_for("q/1")
    assert c.collect_retained("q/#") == {"q/1": b"one"}
    c.publish_batch([("q/2", b"two")])
    assert inbox.wait_for("q/2")


def test_reconnects_and_resubscribes_after_broker_kill(broker: Mosquitto, clients: list) -> None:
    connects: list[float] = []
    c = connect(clients, settings(broker.url), "survivor", on_connect=lambda: connects.append(1))
    inbox = Inbox()
    c.subscribe("r/#", inbox)
    broker.kill()
    assert eventually(lambda: not c.is_connected, 5)
    broker.start()  # same port, empty broker: the subscription must be renewed by the client
    assert eventually(lambda: c.is_connected, 10), "client did not reconnect"
    other = connect(clients, settings(broker.url), "publisher")
    other.publish_batch([("r/after", b"x")])
    assert inbox.wait_for("r/after"), "no resubscription after the broker restart"
    assert len(connects) == 2


def test_qos1_messages_queued_while_broker_down_are_delivered(broker: Mosquitto, clients: list) -> None:
    c = connect(clients, settings(broker.url), "queuer")
    broker.kill()
    assert eventually(lambda: not c.is_connected, 5)
    with pytest.raises(PublishTimeout) as timeout:
        c.publish_batch([("s/1", b"a"), ("s/2", b"b")], timeout=0.5)
    assert timeout.value.pending == ["s/1", "s/2"]
    broker.start()
    assert eventually(lambda: c.is_connected, 10)
    reader = connect(clients, settings(broker.url), "checker")
    assert eventually(lambda: reader.collect_retained("s/#", settle=0.1) == {
        "s/1": b"a", "s/2": b"b"}, 5)  # fmt: skip


def test_failing_callback_does_not_stop_delivery(broker: Mosquitto, clients: list) -> None:
    c = connect(clients, settings(broker.url), "tolerant")

    def bad(_m: Message) -> None:
        raise RuntimeError("boom")

    inbox = Inbox()
    c.subscribe("t/#", bad)
    c.subscribe("t/#", inbox)
    c.publish_batch([("t/1", b"1"), ("t/2", b"2")])
    assert inbox.wait_for("t/1") and inbox.wait_for("t/2")
    assert c.is_connected


def test_start_fails_within_timeout_when_no_broker() -> None:
    c = MqttClient(settings(f"mqtt://127.0.0.1:{free_port()}"), "lonely")
    started = time.monotonic()
    with pytest.raises(MqttError, match="could not connect"):
        c.start(timeout=1.5)
    assert time.monotonic() - started < 4


def test_mqtt_311_setting_works(broker: Mosquitto, clients: list) -> None:
    c = connect(clients, settings(broker.url, protocol="3.1.1"), "old")
    inbox = Inbox()
    c.subscribe("v/#", inbox)
    c.publish_batch([("v/1", b"x")])
    assert inbox.wait_for("v/1")


def test_plain_websocket_listener_with_path(clients: list) -> None:
    ws = free_port()
    m = Mosquitto([f"listener {ws} 127.0.0.1", "protocol websockets"]).start()
    try:
        assert wait_for_port(ws)
        c = connect(clients, settings(f"ws://127.0.0.1:{ws}/mqtt"), "ws-client")
        c.publish_batch([("w/1", b"x")])
        assert c.collect_retained("w/#") == {"w/1": b"x"}
    finally:
        for client in clients:
            client.stop()
        clients.clear()
        m.stop()


# -- the last will, with a real agent process that can be killed


AGENT = """
import sys, time
from phrame.mqtt import MqttClient, MqttSettings, Will
s = MqttSettings(url=sys.argv[1], will_delay_s=int(sys.argv[2]), session_expiry_s=30)
c = MqttClient(s, "will-agent", will=Will("a/status", b"offline"))
c.start(timeout=5)
c.publish_batch([("a/status", b"online")])
print("ready", flush=True)
time.sleep(60)
"""


def start_agent(url: str, will_delay: int) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        [sys.executable, "-c", AGENT, url, str(will_delay)],
        stdout=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "ready"
    return proc


def kill(proc: subprocess.Popen[str]) -> None:
    proc.kill()
    proc.wait(5)
    if proc.stdout:
        proc.stdout.close()


def test_will_is_published_after_the_delay_when_the_agent_dies(broker: Mosquitto, clients: list) -> None:
    inbox = Inbox()
    connect(clients, settings(broker.url), "observer").subscribe("a/status", inbox)
    agent = start_agent(broker.url, will_delay=1)
    kill(agent)
    died = time.monotonic()
    assert inbox.wait_for("a/status", payload=b"offline", timeout=6)
    assert time.monotonic() - died >= 0.8, "the will ignored its delay"


@pytest.mark.slow
def test_quick_restart_within_the_will_delay_does_not_flap(broker: Mosquitto, clients: list) -> None:
    inbox = Inbox()
    connect(clients, settings(broker.url), "observer").subscribe("a/status", inbox)
    kill(start_agent(broker.url, will_delay=3))
    again = start_agent(broker.url, will_delay=3)  # same client id resumes the session
    try:
        assert not inbox.wait_for("a/status", payload=b"offline", timeout=4)
    finally:
        kill(again)


def test_clean_stop_sends_no_will(broker: Mosquitto, clients: list) -> None:
    inbox = Inbox()
    connect(clients, settings(broker.url), "observer").subscribe("b/status", inbox)
    agent = MqttClient(settings(broker.url, will_delay_s=0), "b", will=Will("b/status", b"off"))
    agent.start(timeout=5)
    agent.publish_batch([("b/status", b"on")])
    assert inbox.wait_for("b/status", payload=b"on")
    agent.stop()
    assert not agent.is_connected
    assert not inbox.wait_for("b/status", payload=b"off", timeout=1)


def test_stop_ends_the_session_so_nothing_is_queued_for_it(broker: Mosquitto, clients: list) -> None:
    first = MqttClient(settings(broker.url), "sessioned")
    first.start(timeout=5)
    first.subscribe("z/#", Inbox())
    first.publish_batch([("z/ready", b"r")], retain=False)
    first.stop()
    connect(clients, settings(broker.url), "pub").publish_batch([("z/while-away", b"x")], retain=False)
    inbox = Inbox()
    again = MqttClient(settings(broker.url), "sessioned")
    again.subscribe("z/#", inbox)  # before start: would catch anything a kept session queued
    again.start(timeout=5)
    clients.append(again)
    again.publish_batch([("z/marker", b"m")], retain=False)
    assert inbox.wait_for("z/marker")
    assert not inbox.wait_for("z/while-away", timeout=0.3)


def test_blocking_calls_from_a_callback_are_refused(broker: Mosquitto, clients: list) -> None:
    c = connect(clients, settings(broker.url), "reentrant")
    errors: list[Exception] = []
    done = threading.Event()

    def callback(_m: Message) -> None:
        try:
            c.publish_batch([("cb/out", b"x")], timeout=1)
        except MqttError as e:
            errors.append(e)
        done.set()

    c.subscribe("cb/in", callback)
    c.publish_batch([("cb/in", b"go")], retain=False)
    assert done.wait(5)
    assert errors and "callback" in str(errors[0])


@pytest.mark.parametrize("protocol", ["5", "3.1.1"])
def test_a_broker_shutdown_is_logged_as_one_clear_sentence(
    broker: Mosquitto, clients: list, protocol: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A clean mosquitto shutdown read "Unspecified error" (paho's name for
    a connection closed without a DISCONNECT packet)."""
    c = connect(clients, settings(broker.url, protocol=protocol), "bystander")
    with caplog.at_level(logging.INFO, logger="phrame.mqtt"):
        broker.stop()  # SIGTERM: mosquitto 2 closes the socket without sending DISCONNECT
        assert eventually(lambda: not c.is_connected, 5)
        assert eventually(lambda: any("disconnected" in r.getMessage() for r in caplog.records), 5)
    said = [r.getMessage() for r in caplog.records if "disconnected" in r.getMessage()]
    assert len(said) == 1, said
    assert "Unspecified error" not in said[0]
    assert "the broker closed the connection" in said[0] and "reconnecting" in said[0]


@pytest.mark.slow
def test_a_silent_broker_is_logged_as_one_lost_connection(
    broker: Mosquitto, clients: list, caplog: pytest.LogCaptureFixture
) -> None:
    """Fault 9 found it: paho reports a keepalive timeout twice (its keepalive check and its
    PINGRESP check in one call; eclipse-paho/paho.mqtt.python#870), so every partition
    was logged as two losses."""
    proxy = PartitionProxy(broker.port)
    try:
        c = connect(clients, settings(f"mqtt://127.0.0.1:{proxy.port}", keepalive_s=1), "partitioned")
        with caplog.at_level(logging.INFO, logger="phrame.mqtt"):
            proxy.partition()  # silence both ways: only the keepalive can tell
            wait_for(lambda: not c.is_connected, "the keepalive to notice the silence", 10)
            # the next attempt reaches the proxy after the first loss was fully reported
            wait_for(lambda: proxy.accepted >= 2, "a reconnect attempt", 10)
        said = [r.getMessage() for r in caplog.records if "disconnected" in r.getMessage()]
        assert len(said) == 1, said
        assert "no answer from the broker within the keepalive" in said[0]
    finally:
        proxy.close()
