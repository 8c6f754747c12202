"""The exceptions of config_sync: one root, and which of them a retry may fix.

The shared adapters keep their own roots (``phrame.git.GitError``, ``phrame.gitlab.GitLabError``,
``phrame.mqtt.MqttError``). A git or broker failure is a :class:`~phrame.runtime.TemporaryError`
(the work queue runs the pass again with backoff); any other failed pass is logged and waits
for the next trigger or poll, so no error ever ends a worker.
"""

from __future__ import annotations

import phrame.settings
from phrame.runtime import TemporaryError


class SyncError(Exception):
    """Root exception of config_sync."""


class SettingsError(SyncError, phrame.settings.SettingsError):
    """A ``PHRAME_*`` setting is missing or malformed (permanent: fix the settings)."""


class PublishError(SyncError, TemporaryError):
    """The broker did not acknowledge a publication; the next pass completes it."""
