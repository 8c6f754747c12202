"""The topic API's root exception and the settings error (a bad ``PHRAME_*`` value)."""

from __future__ import annotations

import phrame.settings


class TopicApiError(Exception):
    """Root of the topic API's own errors."""


class SettingsError(TopicApiError, phrame.settings.SettingsError):
    """A setting is missing or malformed; the message names the variable."""


class WriteRefused(TopicApiError):
    """A write was refused: ``status`` is the HTTP status to answer, the message says why."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
