"""The exceptions of config_sync: one root, and the transient/permanent split of the loop.

The shared adapters keep their own roots (``phrame.git.GitError``, ``phrame.gitlab.GitLabError``,
``phrame.mqtt.MqttError``); the work queue logs a failed pass and retries it on the next
trigger or poll, so no error ever ends a worker.
"""

from __future__ import annotations

import phrame.settings


class SyncError(Exception):
    """Root exception of config_sync."""


class SettingsError(SyncError, phrame.settings.SettingsError):
    """A ``PHRAME_*`` setting is missing or malformed (permanent: fix the settings)."""


class PublishError(SyncError):
    """The broker did not acknowledge a publication; the next pass completes it."""
