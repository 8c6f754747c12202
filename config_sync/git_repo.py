"""The gitpython adapter: one cached bare clone of the config repo under PHRAME_STATE_DIR.

The sync and review passes call :meth:`GitRepo.fetch` then :meth:`GitRepo.head` and read
trees through ``config_repo.sources.GitSource`` at a sha, never checking anything out.
A GitLab token goes to git through the environment (never argv, never the URL on disk),
as does a private CA (PHRAME_GIT_CA_FILE, as GIT_SSL_CAINFO).
A fetch that outlasts ``timeout_s`` (PHRAME_GIT_TIMEOUT_S) is killed: a transient GitError.
"""

from __future__ import annotations

import logging
import threading
import time
from pathlib import Path

import git
from gitdb.exc import BadName, BadObject

from config_repo import ConfigRepo, Problem, ReadCache, load
from config_repo.sources import GitSource
from config_sync.errors import GitError
from phrame_settings.git_remote import hint, remote_env

log = logging.getLogger(__name__)

REFSPECS = (
    "+refs/heads/*:refs/remotes/origin/*",
    # GitLab keeps every MR's head here, also for MRs from forks
    "+refs/merge-requests/*/head:refs/remotes/origin/merge-requests/*",
)


class GitRepo:
    """A bare clone of ``url`` at ``<state_dir>/config-sync/config-repo.git``; thread-safe."""

    def __init__(
        self,
        url: str,
        state_dir: str | Path,
        *,
        token: str | None = None,
        ca_file: str | Path | None = None,
        timeout_s: float = 120.0,
    ) -> None:
        self.url = url
        self.timeout_s = timeout_s
        self.path = Path(state_dir) / "config-sync" / "config-repo.git"
        self._token = token
        self._ca_file = ca_file
        self._lock = threading.Lock()
        self.fetched_at: float | None = None
        self.fetches = 0

    def _open(self) -> git.Repo:
        if (self.path / "HEAD").is_file():
            return git.Repo(self.path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        repo = git.Repo.init(self.path, bare=True)
        repo.create_remote("origin", self.url)
        log.info("created the clone cache %s for %s", self.path, self.url)
        return repo

    def fetch(self) -> None:
        """Bring every branch (and MR head) up to date, pruning deleted ones."""
        with self._lock:
            try:
                with (
                    self._open() as repo,
                    repo.git.custom_environment(**remote_env(self._token, self._ca_file)),
                ):
                    repo.git.fetch(
                        "--prune", "--quiet", "origin", *REFSPECS, kill_after_timeout=self.timeout_s
                    )
            except (git.GitError, OSError) as e:
                if _timed_out(e):
                    raise GitError(
                        f"fetching {self.url} timed out after {self.timeout_s:g} s (PHRAME_GIT_TIMEOUT_S);"
                        " git was stopped, the next pass tries again"
                    ) from e
                raise GitError(
                    f"cannot fetch {self.url} into {self.path}: {_short(e)}{hint(str(e), 'read_repository')}"
                ) from e
            self.fetched_at = time.time()
            self.fetches += 1

    def head(self, branch: str) -> str:
        """The sha at the head of ``branch`` as last fetched."""
        if branch.startswith("refs/tags/"):
            raise GitError(f"{branch}: tags are never tracked")
        try:
            # closed at once: an open Repo keeps a `git cat-file` process until garbage collection
            with git.Repo(self.path) as repo:
                return str(repo.commit(f"refs/remotes/origin/{branch}").hexsha)
        except (git.GitError, BadName, BadObject, ValueError, OSError) as e:
            raise GitError(f"branch {branch!r} not found in {self.url}: {_short(e)}") from e

    def merge_base(self, a: str, b: str) -> str | None:
        """The best common ancestor of two fetched commits; ``None`` for unrelated histories."""
        try:
            with git.Repo(self.path) as repo:
                out = repo.git.merge_base(a, b)
        except git.GitCommandError as e:
            if e.status == 1:  # git's answer for "no common ancestor"
                return None
            raise GitError(f"cannot find the merge base of {a[:12]} and {b[:12]}: {_short(e)}") from e
        except (git.GitError, OSError) as e:
            raise GitError(f"cannot find the merge base of {a[:12]} and {b[:12]}: {_short(e)}") from e
        return str(out).strip() or None

    def has_branch(self, branch: str) -> bool:
        try:
            self.head(branch)
        except GitError:
            return False
        return True

    def load(self, sha: str, *, cache: ReadCache | None = None) -> tuple[ConfigRepo, list[Problem]]:
        """The repository's tree at ``sha`` (read from objects, no checkout)."""
        source = GitSource(self.path, sha)
        try:
            return load(source, cache=cache)  # reads every file it needs before returning
        finally:
            source.repo.close()  # its git cat-file processes end now, not at garbage collection


def _timed_out(e: BaseException) -> bool:
    """gitpython's way of saying ``kill_after_timeout`` stopped the command."""
    return isinstance(e, git.GitCommandError) and "did not complete in" in str(e.stderr)


def _short(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return " ".join(line.strip() for line in text[-3:]) if text else type(e).__name__
