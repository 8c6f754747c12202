"""Why a connection ended, as one sentence a person can act on.

Called by :class:`phrame.mqtt.client.MqttClient` when paho reports a disconnect. paho
names a socket the broker closed without a DISCONNECT packet (mosquitto 2 on SIGTERM, a
restart, a dropped network) "Unspecified error", which reads like a bug in us. Pure: it
takes the reason's number and name, never paho's objects, and it never logs.
"""

from __future__ import annotations

UNSPECIFIED = 128
KEEPALIVE = 141

# MQTT 5 reason codes a broker sends in its DISCONNECT packet (OASIS MQTT 5.0, 3.14.2.1)
FROM_BROKER = {
    0: "the broker closed the connection normally",
    UNSPECIFIED: "the broker disconnected us without saying why",
    130: "the broker disconnected us for a protocol error",
    135: "the broker disconnected us: not authorized (check the ACL and credentials)",
    137: "the broker is busy and disconnected us",
    139: "the broker closed the connection (server shutting down)",
    KEEPALIVE: "the broker heard nothing from us within the keepalive",
    142: "another client connected with our client id (session taken over): is this service running twice?",
    151: "the broker disconnected us: quota exceeded",
    156: "the broker asks us to use another server",
    157: "the broker has moved to another server",
}


def describe_disconnect(value: int, name: str, *, from_broker: bool) -> str:
    """A sentence for a disconnect with reason ``value`` (``name`` as paho spells it);
    ``from_broker``: the broker sent a DISCONNECT packet, else the connection just ended."""
    if from_broker:
        return FROM_BROKER.get(value, f"the broker disconnected us: {name}")
    if value == UNSPECIFIED:  # paho's MQTT_ERR_CONN_LOST: end of stream, no DISCONNECT packet
        return "the broker closed the connection (it shut down or restarted, or the network dropped it)"
    if value == KEEPALIVE:
        return "no answer from the broker within the keepalive (the broker or the network is down)"
    return f"the connection ended: {name}"


SHORT_S = 5.0  # a connection the broker ends sooner than this after login counts as short
HINT_AFTER = 3  # short connections in a row before the hint is given


class ShortConnections:
    """Counts connections ended soon after login, the sign of another login with our
    account: the generated broker config makes the user name the client id, so two
    processes with one account take each other's place over and over. Pure; the client
    logs when :meth:`ended` says so (once per client)."""

    def __init__(self) -> None:
        self.in_a_row = 0
        self.said = False

    def ended(self, lasted_s: float) -> bool:
        """Record a connection that lasted ``lasted_s``; True when it is time for the hint."""
        self.in_a_row = self.in_a_row + 1 if lasted_s < SHORT_S else 0
        if self.in_a_row >= HINT_AFTER and not self.said:
            self.said = True
            return True
        return False
