"""Errors of the placement reconciler, all under one root, :class:`PlacementError`.

The loop catches ``PlacementError`` per environment, logs it and carries on; the
subclasses tell a transient failure (retry) from a permanent one (report and wait).
"""

from __future__ import annotations

import phrame.git


class PlacementError(Exception):
    """Root of every error raised by ``placement``."""


class SettingsError(PlacementError):
    """A ``PHRAME_*`` setting of the reconciler is missing or malformed."""


class GitError(PlacementError, phrame.git.GitError):
    """Git could not fetch, read, commit or push (transient unless a subclass says otherwise)."""


class PushRejected(GitError, phrame.git.PushRejected):
    """The remote branch moved since we read it (compare-and-swap failed): fetch and retry."""


class TagTargetError(GitError, phrame.git.TagTargetError):
    """A placement commit would land on ``refs/tags/*``; placement never writes to a tag."""


class GitLabError(PlacementError):
    """The GitLab API refused or failed a request (merge request lookup or creation)."""


class InvalidInputs(PlacementError):
    """The commit holds node or service files that cannot be read: nothing is decided."""


class NotOnTrackedRef(PlacementError):
    """The environment is listed on the default ref but absent from the ref it tracks."""
