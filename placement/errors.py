"""Errors of the placement reconciler, all under one root, :class:`PlacementError`.

The loop catches :data:`EXPECTED` per environment (these, and the shared adapters' own
roots: ``phrame.git.GitError``, ``phrame.gitlab.GitLabError``), logs it and carries on;
the subclasses tell a transient failure (retry) from a permanent one (report and wait).
"""

from __future__ import annotations

import phrame.git
import phrame.gitlab
import phrame.settings


class PlacementError(Exception):
    """Root of every error raised by ``placement``."""


class SettingsError(PlacementError, phrame.settings.SettingsError):
    """A ``PHRAME_*`` setting of the reconciler is missing or malformed."""


class InvalidInputs(PlacementError):
    """The commit holds node or service files that cannot be read: nothing is decided."""


class NotOnTrackedRef(PlacementError):
    """The environment is listed on the default ref but absent from the ref it tracks."""


# what a pass expects to fail with and carries on after (anything else is a bug)
EXPECTED: tuple[type[Exception], ...] = (PlacementError, phrame.git.GitError, phrame.gitlab.GitLabError)
