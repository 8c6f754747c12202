"""The errors of the git adapter: the one hierarchy config-sync, placement, the topic API and
the CLI all catch (no service defines its own ``GitError`` or ``RefMissing``).

``GitError`` is transient (the next pass retries); ``RefMissing``, ``PushRejected`` and
``TagTargetError`` say more. Every ``phrame.git`` call raises these and nothing of gitpython.
"""

from __future__ import annotations


class GitError(Exception):
    """Git could not fetch, read, commit or push (transient unless a subclass says otherwise)."""


class RefMissing(GitError):
    """The branch or tag is not on the remote (deleted, or not created yet)."""


class PushRejected(GitError):
    """The remote branch moved since it was read (the compare-and-swap failed): fetch and retry."""


class TagTargetError(GitError):
    """A write would land on ``refs/tags/*`` (or outside ``refs/heads/*``); never done."""
