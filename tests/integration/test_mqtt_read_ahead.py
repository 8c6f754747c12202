"""The client reads its socket ahead: paho alone reads a packet in three reads or more (its
type, its length a byte at a time, the rest), one packet at a time; read ahead, one read
brings many packets, and paho is handed the next ones from what is already read. Every
message still arrives, in order, across a reconnect."""

from __future__ import annotations

import threading

from phrame.mqtt import Message, MqttClient, MqttSettings
from tests.support.mosquitto import Mosquitto
from tests.support.waiting import wait_for

COUNT = 900  # within mosquitto's default queue for one client (1,000 past the 20 in flight)


def test_a_burst_is_handed_out_from_bytes_already_read_and_survives_a_reconnect(mosquitto: Mosquitto) -> None:
    writer = MqttClient(MqttSettings(url=mosquitto.url), "read-ahead-writer")
    reader = MqttClient(MqttSettings(url=mosquitto.url), "read-ahead-reader")
    got: list[Message] = []
    # per message, the bytes already read from the socket that paho had not taken yet when it
    # handed the message over: more than 0 means later packets came with this one's read
    ahead: list[int] = []
    lock = threading.Lock()

    def on_message(message: Message) -> None:
        with lock:
            got.append(message)
            ahead.append(reader._paho.read_ahead())

    def received() -> int:
        with lock:
            return len(got)

    try:
        writer.start(timeout=10)
        writer.publish_batch([(f"ahead/{i:04d}", str(i).encode()) for i in range(COUNT)])
        reader.start(timeout=10)
        assert reader.subscribe("ahead/+", on_message)  # the retained replay: COUNT packets at once
        wait_for(lambda: received() >= COUNT, f"{COUNT} retained messages", 20, observe=received)
        assert sorted(m.payload for m in got) == sorted(str(i).encode() for i in range(COUNT))
        with lock:
            assert max(ahead) > 0, "no message was handed out from bytes read with an earlier one"
        # a reconnect starts from a clean read: every message after it arrives whole
        connects = reader.connect_count
        mosquitto.restart()
        wait_for(lambda: reader.connect_count > connects and writer.is_connected, "both reconnected", 20)
        with lock:
            got.clear()
        writer.publish_batch([(f"ahead/{i:04d}", b"again") for i in range(100)], retain=False)
        wait_for(lambda: received() >= 100, "100 live messages after the reconnect", 20, observe=received)
        assert [m.topic for m in got] == [f"ahead/{i:04d}" for i in range(100)]
    finally:
        reader.stop()
        writer.stop()
