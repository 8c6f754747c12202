"""A subscription's QoS: heartbeats are read at QoS 0, everything else at QoS 1.

At 10,000 nodes a liveness reader gets 2,000 heartbeats a second; at QoS 1 it sends a
PUBACK for each and the broker tracks each in flight. A reader now asks QoS 0 for them
(a lost beat is a late one), and keeps that QoS across a reconnect and a retained read.
"""

from __future__ import annotations

import threading

from phrame.actual import HEARTBEAT_QOS
from phrame.mqtt import Message, MqttClient, MqttSettings
from tests.support.mosquitto import Mosquitto
from tests.support.waiting import wait_for


class Inbox:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.got: dict[str, Message] = {}

    def __call__(self, message: Message) -> None:
        with self.lock:
            self.got[message.topic] = message

    def qos(self, topic: str, payload: bytes) -> int | None:
        with self.lock:
            message = self.got.get(topic)
        return message.qos if message is not None and message.payload == payload else None


def test_each_filter_keeps_its_qos_across_a_reconnect_and_a_read(mosquitto: Mosquitto) -> None:
    reader = MqttClient(MqttSettings(url=mosquitto.url), "qos-reader")
    writer = MqttClient(MqttSettings(url=mosquitto.url), "qos-writer")
    inbox = Inbox()
    try:
        writer.start(timeout=10)
        reader.start(timeout=10)
        assert reader.subscribe("qos/nodes/+/heartbeat", inbox, qos=HEARTBEAT_QOS)
        assert reader.subscribe("qos/nodes/+/status", inbox)

        def round_trip(n: int) -> None:
            payload = f"{n}".encode()
            writer.publish_batch([("qos/nodes/a/heartbeat", payload), ("qos/nodes/a/status", payload)])
            beat = lambda: inbox.qos("qos/nodes/a/heartbeat", payload)  # noqa: E731
            status = lambda: inbox.qos("qos/nodes/a/status", payload)  # noqa: E731
            wait_for(lambda: beat() is not None and status() is not None, f"round {n} delivered", 10)
            assert (beat(), status()) == (0, 1), f"round {n}: delivered QoS (heartbeat, status)"

        round_trip(1)
        # a retained read of the very filter must not raise its QoS (a SUBSCRIBE replaces it)
        assert reader.collect_retained("qos/nodes/+/heartbeat") == {"qos/nodes/a/heartbeat": b"1"}
        round_trip(2)
        connects = reader.connect_count
        mosquitto.restart()  # renewed on reconnect, each group with its own QoS
        wait_for(lambda: reader.connect_count > connects and writer.is_connected, "both reconnected", 20)
        round_trip(3)
    finally:
        reader.stop()
        writer.stop()
