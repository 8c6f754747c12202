"""A minimal MQTT 3.1.1 client on asyncio streams, for the simulated fleet only.

``fleet_lite.py`` holds thousands of simulated nodes' connections in one process with it:
one socket and one reader task per connection, no thread, no select() limit (paho's network
loop uses select() and a thread per client, which caps a process at ~300 connections).
It speaks what an agent needs: CONNECT with a last will, SUBSCRIBE (QoS 1), PUBLISH QoS 0/1
both ways (PUBACKs sent for what it receives; its own QoS 1 publishes are not awaited, their
PUBACKs only counted), PINGREQ, DISCONNECT. No TLS, no auth, no QoS 2, no reconnect: a
benchmark's broker on 127.0.0.1. The packet functions are pure (tested in tests/unit).
No product code imports it.
"""

from __future__ import annotations

import asyncio
import contextlib
import struct
from collections.abc import Callable
from dataclasses import dataclass

CONNECT, CONNACK, PUBLISH, PUBACK, SUBSCRIBE, SUBACK = 1, 2, 3, 4, 8, 9
PINGREQ, PINGRESP, DISCONNECT = 12, 13, 14
MAX_REMAINING = 268_435_455  # the most a 4-byte remaining length can say


class MqttLiteError(Exception):
    """A malformed packet, a refused connection, or a connection that ended."""


def encode_varint(n: int) -> bytes:
    """MQTT's remaining length: 7 bits a byte, least significant first, at most 4 bytes."""
    if not 0 <= n <= MAX_REMAINING:
        raise MqttLiteError(f"remaining length {n} out of range")
    out = bytearray()
    while True:
        byte, n = n % 128, n // 128
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


def decode_varint(data: bytes, start: int = 0) -> tuple[int, int]:
    """(value, index after it) of a remaining length at ``data[start:]``; raises when cut short."""
    value, shift = 0, 0
    for i in range(start, min(start + 4, len(data))):
        value |= (data[i] & 0x7F) << shift
        if not data[i] & 0x80:
            return value, i + 1
        shift += 7
    if len(data) - start >= 4:
        raise MqttLiteError("remaining length longer than 4 bytes")
    raise MqttLiteError("remaining length cut short")


def _str(s: str | bytes) -> bytes:
    b = s.encode() if isinstance(s, str) else s
    return struct.pack("!H", len(b)) + b


def packet(kind: int, flags: int, body: bytes) -> bytes:
    return bytes([kind << 4 | flags]) + encode_varint(len(body)) + body


@dataclass(frozen=True)
class Will:
    topic: str
    payload: bytes
    qos: int = 1
    retain: bool = True


def connect_packet(client_id: str, *, keepalive: int, will: Will | None = None, clean: bool = True) -> bytes:
    flags = 0x02 if clean else 0
    payload = _str(client_id)
    if will is not None:
        flags |= 0x04 | will.qos << 3 | (0x20 if will.retain else 0)
        payload += _str(will.topic) + _str(will.payload)
    return packet(CONNECT, 0, _str("MQTT") + bytes([4, flags]) + struct.pack("!H", keepalive) + payload)


def publish_packet(topic: str, payload: bytes, *, qos: int, retain: bool, packet_id: int = 0) -> bytes:
    body = _str(topic) + (struct.pack("!H", packet_id) if qos else b"") + payload
    return packet(PUBLISH, qos << 1 | int(retain), body)


def subscribe_packet(packet_id: int, topic_filter: str, qos: int = 1) -> bytes:
    return packet(SUBSCRIBE, 0x02, struct.pack("!H", packet_id) + _str(topic_filter) + bytes([qos]))


def puback_packet(packet_id: int) -> bytes:
    return packet(PUBACK, 0, struct.pack("!H", packet_id))


PINGREQ_PACKET = packet(PINGREQ, 0, b"")
DISCONNECT_PACKET = packet(DISCONNECT, 0, b"")


@dataclass(frozen=True)
class Publish:
    topic: str
    payload: bytes
    qos: int
    retain: bool
    packet_id: int


def parse_publish(flags: int, body: bytes) -> Publish:
    qos, retain = (flags >> 1) & 3, bool(flags & 1)
    if qos > 1:
        raise MqttLiteError(f"QoS {qos} is not spoken here")
    if len(body) < 2:
        raise MqttLiteError("PUBLISH cut short")
    (n,) = struct.unpack_from("!H", body)
    at = 2 + n
    if len(body) < at + (2 if qos else 0):
        raise MqttLiteError("PUBLISH cut short")
    topic = body[2:at].decode()
    packet_id = 0
    if qos:
        (packet_id,) = struct.unpack_from("!H", body, at)
        at += 2
    return Publish(topic, body[at:], qos, retain, packet_id)


def split_packets(data: bytes) -> tuple[list[tuple[int, int, bytes]], bytes]:
    """The whole packets at the start of ``data`` as (type, flags, body), and the rest."""
    out: list[tuple[int, int, bytes]] = []
    at = 0
    while len(data) - at >= 2:
        try:
            length, body_at = decode_varint(data, at + 1)
        except MqttLiteError as e:
            if "cut short" in str(e):
                break
            raise
        end = body_at + length
        if end > len(data):
            break
        out.append((data[at] >> 4, data[at] & 0x0F, data[body_at:end]))
        at = end
    return out, data[at:]


class Connection:
    """One client connection. ``on_message(publish)`` runs on the event loop for each PUBLISH."""

    def __init__(self, client_id: str, on_message: Callable[[Publish], None]) -> None:
        self.client_id = client_id
        self.on_message = on_message
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None
        self._next_id = 0
        self.unacked = 0  # own QoS 1 publishes whose PUBACK has not come yet
        self.subacks = 0
        self.closed = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._buffer = b""

    def _packet_id(self) -> int:
        self._next_id = self._next_id % 65535 + 1
        return self._next_id

    async def connect(self, host: str, port: int, *, keepalive: int, will: Will | None) -> None:
        self.reader, self.writer = await asyncio.open_connection(host, port)
        self.writer.write(connect_packet(self.client_id, keepalive=keepalive, will=will))
        kind, _, body = await self._read_packet()
        if kind != CONNACK or len(body) != 2 or body[1] != 0:
            raise MqttLiteError(f"{self.client_id}: connection refused ({kind}, {body!r})")
        self._task = asyncio.get_running_loop().create_task(self._read_loop())

    async def _read_packet(self) -> tuple[int, int, bytes]:
        """One packet, before the read loop runs (CONNACK)."""
        assert self.reader is not None
        while True:
            packets, rest = split_packets(self._buffer)
            if packets:
                self._buffer = rest + b"".join(packet(k, f, b) for k, f, b in packets[1:])
                return packets[0]
            data = await self.reader.read(65536)
            if not data:
                raise MqttLiteError(f"{self.client_id}: connection closed")
            self._buffer += data

    async def _read_loop(self) -> None:
        assert self.reader is not None
        try:
            while True:
                packets, self._buffer = split_packets(self._buffer)
                for kind, flags, body in packets:
                    if kind == PUBLISH:
                        msg = parse_publish(flags, body)
                        if msg.qos == 1:
                            self.write(puback_packet(msg.packet_id))
                        self.on_message(msg)
                    elif kind == PUBACK:
                        self.unacked -= 1
                    elif kind == SUBACK:
                        self.subacks += 1
                data = await self.reader.read(65536)
                if not data:
                    return
                self._buffer += data
        except (ConnectionError, MqttLiteError, asyncio.CancelledError):
            pass
        finally:
            self.closed.set()

    def write(self, data: bytes) -> None:
        if self.writer is not None and not self.writer.is_closing():
            self.writer.write(data)

    def subscribe(self, topic_filter: str) -> None:
        self.write(subscribe_packet(self._packet_id(), topic_filter))

    def publish(self, topic: str, payload: bytes, *, qos: int = 1, retain: bool = True) -> None:
        pid = self._packet_id() if qos else 0
        self.unacked += bool(qos)
        self.write(publish_packet(topic, payload, qos=qos, retain=retain, packet_id=pid))

    def ping(self) -> None:
        self.write(PINGREQ_PACKET)

    async def disconnect(self) -> None:
        """A clean DISCONNECT: the broker discards the will."""
        if self.writer is None:
            return
        self.write(DISCONNECT_PACKET)
        with contextlib.suppress(ConnectionError):
            await self.writer.drain()
        self.writer.close()
        if self._task is not None:
            self._task.cancel()
