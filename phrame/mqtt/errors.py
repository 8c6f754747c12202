"""Errors of the shared MQTT client package, all under one root, :class:`MqttError`.

Callers catch ``MqttError`` to handle any broker, settings or token problem; the
subclasses say which one. Nothing here imports paho.
"""

from __future__ import annotations

import phrame.settings


class MqttError(Exception):
    """Root of every error raised by ``phrame.mqtt``."""


class SettingsError(MqttError, phrame.settings.SettingsError):
    """A ``PHRAME_*`` MQTT setting is missing, malformed or contradictory."""


class PublishTimeout(MqttError):
    """Not every message of a batch was acknowledged (PUBACK) in time."""

    def __init__(self, message: str, *, pending: list[str]) -> None:
        super().__init__(message)
        self.pending = pending


class TokenError(MqttError):
    """The OAuth2 token endpoint refused us or could not be reached (retried by the caller)."""


class PublishRefused(MqttError):
    """The broker acknowledged messages with a failure reason (MQTT 5), e.g. the ACL."""

    def __init__(self, message: str, *, topics: list[str]) -> None:
        super().__init__(message)
        self.topics = topics
