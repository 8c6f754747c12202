"""The simulated fleet's minimal MQTT 3.1.1 client (benchmarks/mqtt_lite.py): packet bytes
against the specification's layout, and splitting a stream into packets."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
if str(BENCHMARKS) not in sys.path:
    sys.path.insert(0, str(BENCHMARKS))

from mqtt_lite import (  # noqa: E402  (benchmarks/ is not a package)
    MqttLiteError,
    Will,
    connect_packet,
    decode_varint,
    encode_varint,
    parse_publish,
    puback_packet,
    publish_packet,
    split_packets,
    subscribe_packet,
)


@pytest.mark.parametrize(
    ("n", "wire"),
    [
        (0, b"\x00"),
        (127, b"\x7f"),
        (128, b"\x80\x01"),
        (16_383, b"\xff\x7f"),
        (16_384, b"\x80\x80\x01"),
        (2_097_152, b"\x80\x80\x80\x01"),
        (268_435_455, b"\xff\xff\xff\x7f"),
    ],
)
def test_remaining_length_round_trips_the_specification_examples(n: int, wire: bytes) -> None:
    assert encode_varint(n) == wire
    assert decode_varint(wire + b"rest") == (n, len(wire))


def test_remaining_length_out_of_range_or_too_long_is_refused() -> None:
    with pytest.raises(MqttLiteError):
        encode_varint(268_435_456)
    with pytest.raises(MqttLiteError, match="longer than 4"):
        decode_varint(b"\xff\xff\xff\xff\x01")
    with pytest.raises(MqttLiteError, match="cut short"):
        decode_varint(b"\x80\x80")


def test_connect_carries_a_retained_qos1_will_and_a_clean_session() -> None:
    wire = connect_packet("phrame-agent-n1", keepalive=60, will=Will("phrame/actual/nodes/n1/status", b"{}"))
    assert wire[0] == 0x10
    body = wire[2:]
    assert wire[1] == len(body)
    assert body[:6] == b"\x00\x04MQTT"
    assert body[6] == 4  # protocol level 3.1.1
    assert body[7] == 0x02 | 0x04 | 1 << 3 | 0x20  # clean, will, will QoS 1, will retain
    assert body[8:10] == b"\x00\x3c"
    assert body[10:] == (
        b"\x00\x0fphrame-agent-n1" + b"\x00\x1dphrame/actual/nodes/n1/status" + b"\x00\x02{}"
    )


def test_connect_without_a_will_sets_no_will_flags() -> None:
    wire = connect_packet("c", keepalive=0)
    assert wire[2 + 7] == 0x02


def test_publish_qos1_retained_and_qos0_layouts_parse_back() -> None:
    wire = publish_packet("a/b", b"payload", qos=1, retain=True, packet_id=513)
    assert wire[0] == 0x33
    assert wire[2:] == b"\x00\x03a/b\x02\x01payload"
    (kind, flags, body), *_ = split_packets(wire)[0]
    assert kind == 3
    msg = parse_publish(flags, body)
    assert (msg.topic, msg.payload, msg.qos, msg.retain, msg.packet_id) == ("a/b", b"payload", 1, True, 513)
    plain = parse_publish(*split_packets(publish_packet("t", b"", qos=0, retain=False))[0][0][1:])
    assert (plain.topic, plain.payload, plain.qos, plain.retain) == ("t", b"", 0, False)


def test_qos2_and_cut_publishes_are_refused() -> None:
    with pytest.raises(MqttLiteError, match="QoS 2"):
        parse_publish(0x04, b"\x00\x01a\x00\x01")
    with pytest.raises(MqttLiteError, match="cut short"):
        parse_publish(0x02, b"\x00\x05ab")


def test_subscribe_and_puback_layouts() -> None:
    assert subscribe_packet(7, "x/#") == b"\x82\x08\x00\x07\x00\x03x/#\x01"
    assert puback_packet(258) == b"\x40\x02\x01\x02"


def test_a_stream_splits_into_whole_packets_and_keeps_a_partial_one() -> None:
    big = publish_packet("t", b"x" * 300, qos=1, retain=True, packet_id=1)  # a 2-byte length
    stream = puback_packet(1) + big + publish_packet("u", b"y", qos=0, retain=False)
    for cut in range(len(stream) + 1):
        first, rest = split_packets(stream[:cut])
        second, tail = split_packets(rest + stream[cut:])
        assert tail == b""
        assert [k for k, _, _ in first + second] == [4, 3, 3]
        assert parse_publish(*(first + second)[1][1:]).payload == b"x" * 300
