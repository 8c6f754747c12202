"""Building and (re)connecting the one paho client behind :class:`MqttClient`.

Only this module and :mod:`phrame.mqtt.client` import paho. It turns settings into paho
options: protocol (MQTT 5, or 3.1.1 by setting), transport and WebSocket path, TLS, the
will (with a v5 will delay) and the session expiry. It never opens a second client.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from typing import Any

import paho.mqtt.client as paho
from paho.mqtt.enums import CallbackAPIVersion, MQTTErrorCode
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties
from paho.mqtt.subscribeoptions import SubscribeOptions

from phrame.mqtt.messages import Will
from phrame.mqtt.settings import MqttSettings
from phrame.mqtt.tls import build_ssl_context
from phrame.mqtt.urls import BrokerUrl

# paho's topic matching ($-topics, + and #) for Subscriptions: one matcher, paho's own
topic_matches_sub = paho.topic_matches_sub

# QoS 1 messages a client keeps unacknowledged at once (paho's default is 20). With 20,
# a batch moves one PUBACK round trip per 20 messages: config-sync's 10,001 messages of a
# push at 10,000 nodes did not all leave within 30 s, its network thread reading 2,000
# heartbeats a second between PUBACKs. An MQTT 5 broker's Receive Maximum caps it.
MAX_INFLIGHT = 1000
READ_AHEAD = 65536  # bytes a client reads from its socket at once (WindowedClient)
AUTH_REFUSED = (134, 135, 4, 5)  # bad user name or password / not authorized (v5 and 3.1.1)
UNSUPPORTED_PROTOCOL = 132  # CONNACK 0x84: the broker does not speak MQTT 5 (NATS)


class WindowedClient(paho.Client):
    """paho's client, its send window moved on in constant time per acknowledgement, and its
    socket read ahead.

    On each PUBACK paho 2.x (``_update_inflight``) walks the unacknowledged messages from the
    oldest, past every one in flight, to find the next queued one: with a window of 1,000
    a batch of 10,000 messages cost ten million steps, 6 % of config-sync's CPU in a push at
    10,000 nodes. This keeps the queued messages in order as they are queued (each with its
    message object, so a message id reused after a drop is never mistaken for it) and takes
    them from the front. The walk's other duty, putting messages back after a reconnect, is
    kept: the queue is rebuilt from paho's own list each time paho resets it. Private paho
    2.x methods; the same fields :func:`drop_outgoing` uses.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._queued: deque[tuple[int, paho.MQTTMessage]] = deque()
        self._read_ahead, self._read_at = b"", 0  # bytes read from the socket, not yet handed out
        super().__init__(*args, **kwargs)

    # -- reading: paho asks the socket for one byte (the packet type), one byte at a time
    # (the remaining length) and then the rest, three system calls a packet or more; at
    # 10,000 nodes that was a fifth of config-sync's network thread. This reads up to
    # READ_AHEAD bytes at once and hands paho its bytes from them; loop_read handles what
    # was read ahead before paho waits in select() again (select() knows only the socket).

    def _sock_recv(self, bufsize: int) -> bytes:
        if self._read_at >= len(self._read_ahead):
            data = super()._sock_recv(max(bufsize, READ_AHEAD))
            if len(data) <= bufsize:
                self._read_ahead, self._read_at = b"", 0
                return data
            self._read_ahead, self._read_at = data, 0
        start = self._read_at
        self._read_at = min(start + bufsize, len(self._read_ahead))
        return self._read_ahead[start : self._read_at]

    def loop_read(self, max_packets: int = 1) -> MQTTErrorCode:
        rc = super().loop_read(max_packets)
        while rc == MQTTErrorCode.MQTT_ERR_SUCCESS and self._sock is not None and self.read_ahead() > 0:
            rc = self._packet_read()  # each consumes read-ahead bytes: this ends
            if rc > 0:
                return self._loop_rc_handle(rc)
            rc = MQTTErrorCode.MQTT_ERR_SUCCESS
        return rc

    def read_ahead(self) -> int:
        """Bytes read from the socket that paho has not taken yet."""
        return len(self._read_ahead) - self._read_at

    def _sock_close(self) -> None:
        self._read_ahead, self._read_at = b"", 0  # the next connection starts clean
        super()._sock_close()

    def publish(self, *args: Any, **kwargs: Any) -> paho.MQTTMessageInfo:
        with self._out_message_mutex:  # re-entrant: paho's publish takes it too
            info = super().publish(*args, **kwargs)
            message = self._out_messages.get(info.mid)
            if message is not None and message.state == paho.mqtt_ms_queued:
                self._queued.append((info.mid, message))
        return info

    def _messages_reconnect_reset_out(self) -> None:
        with self._out_message_mutex:
            super()._messages_reconnect_reset_out()
            self._queued = deque(
                (mid, m) for mid, m in self._out_messages.items() if m.state == paho.mqtt_ms_queued
            )

    def _update_inflight(self) -> MQTTErrorCode:
        # called with _out_message_mutex held, as paho's own
        while self._queued and self._inflight_messages < self._max_inflight_messages:
            mid, m = self._queued.popleft()
            if self._out_messages.get(mid) is not m or m.qos == 0 or m.state != paho.mqtt_ms_queued:
                continue  # acknowledged meanwhile, dropped, or sent again on a reconnect
            self._inflight_messages += 1
            m.state = paho.mqtt_ms_wait_for_puback if m.qos == 1 else paho.mqtt_ms_wait_for_pubrec
            rc: MQTTErrorCode = self._send_publish(
                m.mid, m.topic.encode("utf-8"), m.payload, m.qos, m.retain, m.dup, properties=m.properties
            )
            if rc != MQTTErrorCode.MQTT_ERR_SUCCESS:
                return rc
        return MQTTErrorCode.MQTT_ERR_SUCCESS


def build_paho(settings: MqttSettings, client_id: str, will: Will | None) -> paho.Client:
    """A configured, not yet connected paho client."""
    broker = settings.broker
    is_v5 = settings.protocol == "5"
    client = WindowedClient(
        CallbackAPIVersion.VERSION2,
        client_id=client_id,
        # 3.1.1: keep the session (and queued QoS 1 messages) across reconnects.
        clean_session=None if is_v5 else False,
        protocol=paho.MQTTv5 if is_v5 else paho.MQTTv311,
        transport="websockets" if broker.is_websocket else "tcp",
        reconnect_on_failure=True,
    )
    if broker.is_websocket:
        client.ws_set_options(path=broker.path)
    context = build_ssl_context(settings)
    if context is not None:
        client.tls_set_context(context)
    client.reconnect_delay_set(settings.reconnect_min_s, settings.reconnect_max_s)
    client.max_inflight_messages_set(MAX_INFLIGHT)
    if will is not None:
        properties = None
        if is_v5 and settings.will_delay_s > 0:
            # The broker waits this long before publishing the will, so an agent that
            # restarts quickly (and resumes its session) never flaps to offline.
            properties = _properties(PacketTypes.WILLMESSAGE)
            properties.WillDelayInterval = settings.will_delay_s
        client.will_set(will.topic, will.payload, qos=will.qos, retain=will.retain, properties=properties)
    return client


def connect_async(client: paho.Client, settings: MqttSettings, broker: BrokerUrl | None = None) -> None:
    """Point ``client`` at ``broker`` (default the list's first); the network thread makes
    the actual connection."""
    broker = broker or settings.broker
    if settings.protocol == "5":
        properties = _properties(PacketTypes.CONNECT)
        properties.SessionExpiryInterval = settings.session_expiry_s
        # clean_start=False: resume the session, so a restart within the will delay cancels
        # the will and QoS 1 messages queued for us meanwhile are delivered.
        client.connect_async(
            broker.host, broker.port, keepalive=settings.keepalive_s, clean_start=False, properties=properties
        )
    else:
        client.connect_async(broker.host, broker.port, keepalive=settings.keepalive_s)


def point_at(client: paho.Client, broker: BrokerUrl) -> None:
    """Aim ``client``'s connection attempt at ``broker``; called from ``on_pre_connect``.

    paho's ``host``/``port`` setters refuse while its state is "connecting", which it
    already is when it calls ``on_pre_connect`` (before the socket opens, the one moment a
    reconnect can change its target), so the attributes behind them are set directly."""
    client._host, client._port = broker.host, broker.port
    if broker.is_websocket:
        client.ws_set_options(path=broker.path)


def _properties(packet_type: int) -> Properties:
    """MQTT 5 properties of one packet type (paho's constructor carries no annotations)."""
    return Properties(packet_type)  # type: ignore[no-untyped-call]


def end_session(settings: MqttSettings) -> Properties | None:
    """DISCONNECT properties that end an MQTT 5 session now instead of after its expiry."""
    if settings.protocol != "5":
        return None
    properties = _properties(PacketTypes.DISCONNECT)
    properties.SessionExpiryInterval = 0
    return properties


def subscribe_topics(
    settings: MqttSettings,
    filters: list[str],
    *,
    retain_handling: int = 0,
    retain_as_published: bool = False,
    qos: int = 1,
) -> list[tuple[str, int]] | list[tuple[str, SubscribeOptions]]:
    """paho's SUBSCRIBE argument: QoS 1 (a read's temporary subscription: 0), with v5
    options where the protocol has them."""
    if settings.protocol != "5":
        return [(f, qos) for f in filters]
    return [
        (f, SubscribeOptions(qos=qos, retainHandling=retain_handling, retainAsPublished=retain_as_published))
        for f in filters
    ]


def stop_loop(client: paho.Client) -> None:
    """``loop_stop()``, tolerating the network thread ending by itself meanwhile.

    paho clears ``_thread`` as the thread exits, and ``loop_stop()`` checks it and then
    joins it (eclipse-paho/paho.mqtt.python#872, open): a thread that ends in between makes
    it raise AttributeError. The thread is gone then; there is nothing left to join.
    """
    try:
        client.loop_stop()
    except AttributeError:
        if getattr(client, "_thread", None) is not None:  # private; not that race: re-raise
            raise


def release_wakeup_sockets(client: paho.Client) -> None:
    """Close the wake-up socket pair of a stopped network thread.

    paho's ``loop_start()`` makes a new pair each time and ``loop_stop()`` never closes
    the old one; with a thread restart per token refresh that would leak two sockets
    per refresh. Only called after ``loop_stop()`` returned, when nothing uses them.
    """
    reset = getattr(client, "_reset_sockets", None)  # private, present in paho 2.x
    if reset is not None:
        reset(sockpair_only=True)


_IN_FLIGHT = (paho.mqtt_ms_wait_for_puback, paho.mqtt_ms_wait_for_pubrec, paho.mqtt_ms_wait_for_pubcomp)


def drop_outgoing(client: paho.Client, mids: Iterable[int]) -> None:
    """Forget the unacknowledged messages ``mids``: never sent again on reconnect.

    paho's one public way, ``drop_out_messages()``, drops every message, those of other
    callers too. This does what paho does on a PUBACK (pop the message, free its in-flight
    slot), under paho's own lock, through private fields of paho 2.x (an AttributeError
    here, not a silent leak, on a paho without them)."""
    lock, out = client._out_message_mutex, client._out_messages
    with lock:
        for mid in mids:
            message = out.pop(mid, None)
            if message is not None and message.qos > 0 and message.state in _IN_FLIGHT:
                client._inflight_messages -= 1


def send_window(receive_maximum: int | None) -> int:
    """How many QoS 1 messages may be unacknowledged at once on a connection whose CONNACK
    said ``receive_maximum`` (MQTT 5; None: absent, as in 3.1.1, where the spec's default is
    65,535): never more than the broker takes, nor :data:`MAX_INFLIGHT`."""
    return max(1, min(MAX_INFLIGHT, receive_maximum if receive_maximum else 65_535))


def apply_receive_maximum(client: paho.Client, properties: Properties | None) -> int:
    """Narrow the send window to the Receive Maximum of the CONNACK just received.

    paho 2.x reads no Receive Maximum and its setter refuses on a connected client, so this
    sets its private field (read when a PUBACK frees a slot); called from ``on_connect``,
    on paho's network thread, before anything is sent on the new connection."""
    window = send_window(getattr(properties, "ReceiveMaximum", None))
    client._max_inflight_messages = window
    return window
