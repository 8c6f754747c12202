"""The exceptions of config_sync: one root, and which of them a retry may fix.

Adapters (git, GitLab, MQTT) convert their SDK's errors into these. A git or broker failure
is a :class:`~phrame.runtime.TemporaryError` (the work queue runs the pass again with
backoff); any other failed pass is logged and waits for the next trigger or poll.
"""

from __future__ import annotations

import phrame.git
from phrame.runtime import TemporaryError


class SyncError(Exception):
    """Root exception of config_sync."""


class SettingsError(SyncError):
    """A ``PHRAME_*`` setting is missing or malformed (permanent: fix the settings)."""


class GitError(SyncError, phrame.git.GitError):
    """The config repository could not be fetched or a ref resolved (transient); raised by
    the shared git adapter (``phrame.git``) in config-sync's name."""


class GitLabError(SyncError):
    """GitLab's API refused or failed a call (transient unless it says otherwise)."""


class PublishError(SyncError, TemporaryError):
    """The broker did not acknowledge a publication; the next pass completes it."""
