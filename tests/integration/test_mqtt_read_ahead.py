"""The client reads its socket ahead: a packet costs paho three reads or more (its type, its
length a byte at a time, the rest); read ahead it costs at most one, and usually a share of
one. Every message still arrives, in order, across a reconnect."""

from __future__ import annotations

from typing import Any

import paho.mqtt.client as paho
import pytest

from phrame.mqtt import Message, MqttClient, MqttSettings
from tests.support.mosquitto import Mosquitto
from tests.support.waiting import wait_for

COUNT = 900  # within mosquitto's default queue for one client (1,000 past the 20 in flight)


def test_many_messages_take_fewer_socket_reads_than_packets(
    mosquitto: Mosquitto, monkeypatch: pytest.MonkeyPatch
) -> None:
    reads = [0]
    socket_read = paho.Client._sock_recv

    def counted(self: Any, bufsize: int) -> bytes:
        reads[0] += 1
        return socket_read(self, bufsize)

    monkeypatch.setattr(paho.Client, "_sock_recv", counted)
    writer = MqttClient(MqttSettings(url=mosquitto.url), "read-ahead-writer")
    reader = MqttClient(MqttSettings(url=mosquitto.url), "read-ahead-reader")
    got: list[Message] = []
    try:
        writer.start(timeout=10)
        writer.publish_batch([(f"ahead/{i:04d}", str(i).encode()) for i in range(COUNT)])
        reader.start(timeout=10)
        before = reads[0]
        assert reader.subscribe("ahead/+", got.append)  # the retained replay: COUNT packets
        wait_for(lambda: len(got) >= COUNT, f"{COUNT} retained messages", 20, observe=lambda: len(got))
        assert sorted(m.payload for m in got) == sorted(str(i).encode() for i in range(COUNT))
        assert reads[0] - before < 2 * COUNT  # paho alone: at least 3 a packet
        # a reconnect starts from a clean read: every message after it arrives whole
        connects = reader.connect_count
        mosquitto.restart()
        wait_for(lambda: reader.connect_count > connects and writer.is_connected, "both reconnected", 20)
        got.clear()
        writer.publish_batch([(f"ahead/{i:04d}", b"again") for i in range(100)], retain=False)
        wait_for(
            lambda: len(got) >= 100, "100 live messages after the reconnect", 20, observe=lambda: len(got)
        )
        assert [m.topic for m in got] == [f"ahead/{i:04d}" for i in range(100)]
    finally:
        reader.stop()
        writer.stop()
