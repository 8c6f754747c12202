"""config-sync: from a commit of the phrame-config repo to the retained desired plane.

GitLab webhooks and a poll trigger passes that fetch the head of each tracked ref,
validate, render, diff against what is published and publish the difference, then
report to GitLab (statuses, merge-request review notes). It never publishes a commit that
failed validation and never makes a webhook response wait on git or MQTT.
"""

from __future__ import annotations

from config_sync.errors import PublishError, SettingsError, SyncError
from config_sync.settings import SyncSettings

__all__ = ["PublishError", "SettingsError", "SyncError", "SyncSettings"]
