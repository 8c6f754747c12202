"""config-sync's clone cache: ``phrame.git.GitCache`` at ``<state>/config-sync/config-repo.git``.

The sync and review passes call :meth:`SyncRepo.fetch` then :meth:`SyncRepo.head` and read
trees at a sha, never checking anything out; this cache never pushes. The ref policy
(branches, ``refs/tags/<tag>`` with forced fetch), credentials, redaction, timeout and
following a changed URL are all ``phrame.git``'s; this wrapper only places the cache,
raises ``phrame.git``'s errors and counts fetches for ``/ready``.
"""

from __future__ import annotations

import time
from pathlib import Path

from phrame.git.writing import GitWriter


class SyncRepo(GitWriter):
    """A bare clone of ``url`` at ``<state_dir>/config-sync/config-repo.git``; thread-safe."""

    author = ("phrame-rollback", "rollback@phrame.invalid")  # the only commits it makes

    def __init__(
        self,
        url: str,
        state_dir: str | Path,
        *,
        token: str | None = None,
        ca_file: str | Path | None = None,
        timeout_s: float = 120.0,
    ) -> None:
        path = Path(state_dir) / "config-sync" / "config-repo.git"
        super().__init__(url, path, token=token, ca_file=ca_file, timeout_s=timeout_s)
        self.fetched_at: float | None = None
        self.fetches = 0

    def fetch(self) -> None:
        """Bring every branch, tag and MR head up to date, pruning deleted ones."""
        super().fetch()
        self.fetched_at = time.time()
        self.fetches += 1
