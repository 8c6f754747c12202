"""A batch's send window: as many unacknowledged QoS 1 messages as the broker takes.

paho keeps 20 in flight by default, so a batch moved 20 messages per PUBACK round trip;
the client now takes the Receive Maximum of the broker's CONNACK (MQTT 5), up to 1,000.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from phrame.mqtt import MqttClient, MqttSettings
from phrame.mqtt.broker_config import MAX_INFLIGHT_MESSAGES
from tests.support.mosquitto import Mosquitto
from tests.support.waiting import wait_for


@pytest.fixture
def wide_broker() -> Iterator[Mosquitto]:
    broker = Mosquitto([f"max_inflight_messages {MAX_INFLIGHT_MESSAGES}"]).start()
    yield broker
    broker.stop()


def test_the_window_is_the_brokers_receive_maximum(mosquitto: Mosquitto, wide_broker: Mosquitto) -> None:
    wide = MqttClient(MqttSettings(url=wide_broker.url), "window-wide")
    narrow = MqttClient(MqttSettings(url=mosquitto.url), "window-narrow")  # mosquitto's default 20
    old = MqttClient(MqttSettings(url=wide_broker.url, protocol="3.1.1"), "window-311")
    try:
        for c in (wide, narrow, old):
            c.start(timeout=10)
        assert wide.send_window == MAX_INFLIGHT_MESSAGES
        assert narrow.send_window == 20
        assert old.send_window == MAX_INFLIGHT_MESSAGES  # 3.1.1 announces none
        items = [(f"window/{i}", b"x" * 100) for i in range(3 * MAX_INFLIGHT_MESSAGES)]
        for c in (wide, narrow, old):
            c.publish_batch(items, retain=False, timeout=30)  # every PUBACK arrives, none refused
    finally:
        for c in (wide, narrow, old):
            c.stop()


def test_messages_beyond_the_window_leave_in_order(mosquitto: Mosquitto) -> None:
    """The window moves on from its front (not by paho's walk past every message in flight):
    what waited beyond it still goes out in the order it was published, so the last value
    published to a topic is the one the broker keeps."""
    writer = MqttClient(MqttSettings(url=mosquitto.url), "window-order")  # a window of 20
    reader = MqttClient(MqttSettings(url=mosquitto.url), "window-order-reader")
    seen: list[bytes] = []
    try:
        writer.start(timeout=10)
        reader.start(timeout=10)
        assert writer.send_window == 20
        assert reader.subscribe("order/same", lambda m: seen.append(m.payload))
        items: list[tuple[str, bytes | None]] = []
        for i in range(500):  # 1,000 messages, 25 windows: one topic written 500 times
            items += [("order/same", str(i).encode()), (f"order/other/{i}", b"x")]
        writer.publish_batch(items, timeout=30)
        wait_for(lambda: len(seen) >= 500, "the reader heard all 500 writes of one topic", 10)
        assert seen == [str(i).encode() for i in range(500)]
        assert writer.collect_retained("order/same") == {"order/same": b"499"}
    finally:
        writer.stop()
        reader.stop()
