"""The one ref policy of every git user: which names mean a branch or a tag, which may be written.

Pure (no git): config-sync, placement and ``phrame plan`` ask it how a tracked ref is read
from the clone cache and whether a ref may be written. ``main`` and ``refs/heads/main``
name a branch; ``refs/tags/v1`` a tag; a short name with no such branch falls back to a
tag of that name. Only ``refs/heads/*`` is ever written: never a tag, never another ref.
"""

from __future__ import annotations

from phrame.git.errors import GitError, TagTargetError

HEADS = "refs/heads/"
TAGS = "refs/tags/"
REMOTE = "refs/remotes/origin/"

# what `fetch` brings in; "+" updates our own copies only, nothing is ever force-pushed
REFSPECS = (
    f"+{HEADS}*:{REMOTE}*",
    # GitLab keeps every MR's head here, also for MRs from forks
    f"+refs/merge-requests/*/head:{REMOTE}merge-requests/*",
    # forced: a tag moved to another commit is a new release and must replace the old one
    f"+{TAGS}*:{TAGS}*",
)


def is_tag_name(ref: str) -> bool:
    """Whether ``ref`` is spelled as a tag (``refs/tags/...``)."""
    return ref.startswith(TAGS)


def describe(ref: str) -> str:
    """``tag 'v1'`` or ``branch 'main'``, for messages."""
    if is_tag_name(ref):
        return f"tag {ref.removeprefix(TAGS)!r}"
    return f"branch {ref.removeprefix(HEADS)!r}"


def local_candidates(ref: str) -> list[str]:
    """The refs of the clone cache that may hold ``ref``, in the order they are tried."""
    if ref.startswith(HEADS):
        return [REMOTE + ref.removeprefix(HEADS)]
    if is_tag_name(ref):
        return [ref]
    if ref.startswith("refs/"):
        return [ref]  # e.g. refs/merge-requests/1/head is fetched under its own name only
    return [REMOTE + ref, TAGS + ref]


def remote_branch(branch: str) -> str:
    """Where the clone cache keeps remote branch ``branch`` (short or ``refs/heads/`` name)."""
    return REMOTE + branch.removeprefix(HEADS)


def writable_ref(ref: str) -> str:
    """``main`` → ``refs/heads/main``; a tag raises ``TagTargetError``, any other ref ``GitError``."""
    if is_tag_name(ref):
        raise TagTargetError(
            f"refusing to write placement to {ref}: placement never writes to a tag; "
            "track a branch, or use placement: review (which pushes its own branch)"
        )
    if ref.startswith("refs/") and not ref.startswith(HEADS):
        raise GitError(f"refusing to write placement to {ref}: only branches (refs/heads/*) are written")
    return ref if ref.startswith(HEADS) else HEADS + ref
