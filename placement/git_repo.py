"""placement's clone cache and writer: ``phrame.git.GitWriter`` with placement's author.

Fetch, the ref policy (branch or tag, a short name falling back to a tag), commit on an
explicit parent and the never-forced, never-to-a-tag push are all ``phrame.git``'s, as are
credentials, redaction, the timeout (PHRAME_GIT_TIMEOUT_S) and following a changed URL.
This wrapper only names the author of placement's commits; errors are ``phrame.git``'s.
"""

from __future__ import annotations

from pathlib import Path

from phrame.git import refs
from phrame.git.writing import GitWriter

AUTHOR = ("phrame-placement", "placement@phrame.invalid")


def branch_ref(branch: str) -> str:
    """``main`` → ``refs/heads/main``; any ``refs/tags/*`` target raises ``phrame.git.TagTargetError``."""
    return refs.writable_ref(branch)


class PlacementRepo(GitWriter):
    """A bare clone of the config repo at ``cache``, fetched from ``url`` (path or URL)."""

    def __init__(
        self,
        url: str,
        cache: Path,
        *,
        author: tuple[str, str] = AUTHOR,
        token: str | None = None,
        ca_file: str | Path | None = None,
        timeout_s: float = 120.0,
    ) -> None:
        super().__init__(url, cache, token=token, ca_file=ca_file, timeout_s=timeout_s)
        self.cache = self.path
        self.author = author
