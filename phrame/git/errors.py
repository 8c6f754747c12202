"""The errors of the git adapter: one hierarchy shared by config-sync, placement and the CLI.

``GitError`` is a :class:`~phrame.runtime.TemporaryError` (a work queue retries it with
backoff); ``RefMissing`` and ``PushRejected`` say more, and ``TagTargetError`` is permanent.
A service that wants its own root (``SyncError``, ``PlacementError``) defines subclasses
of both and hands them in as :class:`ErrorKinds`, so the adapter raises them directly:
one raise site, no conversion layer to forget.
"""

from __future__ import annotations

from dataclasses import dataclass

from phrame.runtime import PermanentError, TemporaryError


class GitError(TemporaryError):
    """Git could not fetch, read, commit or push (temporary unless a subclass says otherwise)."""


class RefMissing(GitError):
    """The branch or tag is not on the remote (deleted, or not created yet)."""


class PushRejected(GitError):
    """The remote branch moved since it was read (the compare-and-swap failed): fetch and retry."""


class TagTargetError(GitError, PermanentError):
    """A write would land on ``refs/tags/*`` (or outside ``refs/heads/*``); never done."""


@dataclass(frozen=True)
class ErrorKinds:
    """The classes the adapter raises; each must subclass the phrame.git class of its name."""

    git: type[GitError] = GitError
    ref_missing: type[GitError] = RefMissing
    push_rejected: type[GitError] = PushRejected
    tag_target: type[GitError] = TagTargetError
