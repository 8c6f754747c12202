"""The errors of the git adapter: the one hierarchy config-sync, placement, the topic API and
the CLI all catch (no service defines its own ``GitError`` or ``RefMissing``).

``GitError`` is a :class:`~phrame.runtime.TemporaryError` (a work queue retries it with
backoff); ``RefMissing`` and ``PushRejected`` say more, and ``TagTargetError`` is permanent.
Every ``phrame.git`` call raises these and nothing of gitpython.
"""

from __future__ import annotations

from phrame.runtime import PermanentError, TemporaryError


class GitError(TemporaryError):
    """Git could not fetch, read, commit or push (temporary unless a subclass says otherwise)."""


class RefMissing(GitError):
    """The branch or tag is not on the remote (deleted, or not created yet)."""


class PushRejected(GitError):
    """The remote branch moved since it was read (the compare-and-swap failed): fetch and retry."""


class TagTargetError(GitError, PermanentError):
    """A write would land on ``refs/tags/*`` (or outside ``refs/heads/*``); never done."""
