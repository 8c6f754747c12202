"""The shared MQTT client of every Phrame service: one paho client behind a small API.

``MqttSettings.from_env(plane)`` reads the ``PHRAME_*`` settings; ``MqttClient`` connects
over ``mqtt://``, ``mqtts://``, ``ws://`` or ``wss://`` with a password or OAuth2 tokens,
reconnects, resubscribes, publishes batches and reads retained subtrees. No service opens
a paho client of its own. ``broker_config`` generates the broker's config and ACL.
"""

from __future__ import annotations

from phrame.mqtt.client import MqttClient
from phrame.mqtt.errors import (
    MqttError,
    PublishRefused,
    PublishTimeout,
    SettingsError,
    TokenError,
)
from phrame.mqtt.messages import Message, Will
from phrame.mqtt.settings import MqttSettings
from phrame.mqtt.subscriptions import topic_matches

__all__ = [
    "Message",
    "MqttClient",
    "MqttError",
    "MqttSettings",
    "PublishRefused",
    "PublishTimeout",
    "SettingsError",
    "TokenError",
    "Will",
    "topic_matches",
]
