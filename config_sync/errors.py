"""The exceptions of config_sync: one root, and the transient/permanent split of the loop.

Adapters (git, GitLab, MQTT) convert their SDK's errors into these; the work queue logs
a failed pass and retries it on the next trigger or poll, so no error ever ends a worker.
"""

from __future__ import annotations

import phrame.git


class SyncError(Exception):
    """Root exception of config_sync."""


class SettingsError(SyncError):
    """A ``PHRAME_*`` setting is missing or malformed (permanent: fix the settings)."""


class GitError(SyncError, phrame.git.GitError):
    """The config repository could not be fetched or a ref resolved (transient); raised by
    the shared git adapter (``phrame.git``) in config-sync's name."""


class GitLabError(SyncError):
    """GitLab's API refused or failed a call (transient unless it says otherwise)."""


class PublishError(SyncError):
    """The broker did not acknowledge a publication; the next pass completes it."""
