"""The gitpython adapter: one cached bare clone of the config repo under PHRAME_STATE_DIR.

The sync and review passes call :meth:`GitRepo.fetch` then :meth:`GitRepo.head` and read
trees through ``config_repo.sources.GitSource`` at a sha, never checking anything out.
A tracked ref is a branch name or ``refs/tags/<tag>``; tags are fetched with a forced
refspec (a moved or re-created tag is a new release) and pruned when deleted. This cache
only ever fetches: it never pushes, and nothing here writes to the remote.
A GitLab token, or credentials pasted into PHRAME_REPO_URL, go to git through the
environment (never argv, never the URL on disk, never a message: see
``phrame_settings.git_remote``), as does a private CA (PHRAME_GIT_CA_FILE). The cache's
``origin`` follows the URL setting before every fetch, so a changed URL takes effect.
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
from phrame_settings.git_remote import GitRemote, follow_origin, hint
from phrame_settings.state import private_dir

log = logging.getLogger(__name__)

REFSPECS = (
    "+refs/heads/*:refs/remotes/origin/*",
    # GitLab keeps every MR's head here, also for MRs from forks
    "+refs/merge-requests/*/head:refs/remotes/origin/merge-requests/*",
    # forced: a tag moved to another commit is a new release and must replace the old one
    "+refs/tags/*:refs/tags/*",
)
TAG_PREFIX = "refs/tags/"


class RefMissing(GitError):
    """The tracked branch or tag is not on the remote (deleted, or not created yet)."""


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
        self.remote = GitRemote.parse(url, token=token, ca_file=ca_file)
        self.url = self.remote.url  # without credentials: safe to show
        self.timeout_s = timeout_s
        self.path = Path(state_dir) / "config-sync" / "config-repo.git"
        self._lock = threading.Lock()
        self.fetched_at: float | None = None
        self.fetches = 0

    def _open(self) -> git.Repo:
        private_dir(self.path.parent)  # <state>/config-sync: 0700, tightened once if looser
        if (self.path / "HEAD").is_file():
            repo = git.Repo(self.path)
        else:
            repo = git.Repo.init(self.path, bare=True)
            log.info("created the clone cache %s for %s", self.path, self.url)
        # cheap (one `git config`), and a URL changed since the cache was made takes effect;
        # the "+" refspecs and --prune then replace every ref of the old remote
        old = follow_origin(self.path, self.remote)
        if old is not None:
            log.info("repository URL changed from %s to %s", old, self.url)
        return repo

    def fetch(self) -> None:
        """Bring every branch, tag (and MR head) up to date, pruning deleted ones."""
        with self._lock:
            try:
                with (
                    self._open() as repo,
                    repo.git.custom_environment(**self.remote.env()),
                ):
                    # --no-tags: the tags come through their forced refspec only
                    repo.git.fetch(
                        "--prune",
                        "--no-tags",
                        "--quiet",
                        "origin",
                        *REFSPECS,
                        kill_after_timeout=self.timeout_s,
                    )
            except (git.GitError, OSError) as e:
                if _timed_out(e):
                    raise GitError(
                        f"fetching {self.url} timed out after {self.timeout_s:g} s (PHRAME_GIT_TIMEOUT_S);"
                        " git was stopped, the next pass tries again"
                    ) from e
                why = f"{self._why(e)}{hint(str(e), 'read_repository')}"
                raise GitError(f"cannot fetch {self.url} into {self.path}: {why}") from e
            self.fetched_at = time.time()
            self.fetches += 1

    def head(self, ref: str) -> str:
        """The commit ``ref`` (a branch name or ``refs/tags/<tag>``) points to as last
        fetched; an annotated tag is peeled to its commit. :class:`RefMissing` when absent."""
        is_tag = ref.startswith(TAG_PREFIX)
        local = ref if is_tag else f"refs/remotes/origin/{ref}"
        what = f"tag {ref.removeprefix(TAG_PREFIX)!r}" if is_tag else f"branch {ref!r}"
        try:
            # closed at once: an open Repo keeps a `git cat-file` process until garbage collection
            with git.Repo(self.path) as repo:
                return str(repo.commit(local).hexsha)
        except (BadName, BadObject, ValueError) as e:
            raise RefMissing(f"{what} not found in {self.url}: {self._why(e)}") from e
        except (git.GitError, OSError) as e:
            raise GitError(f"cannot read {what} in {self.path}: {self._why(e)}") from e

    def merge_base(self, a: str, b: str) -> str | None:
        """The best common ancestor of two fetched commits; ``None`` for unrelated histories."""
        try:
            with git.Repo(self.path) as repo:
                out = repo.git.merge_base(a, b)
        except git.GitCommandError as e:
            if e.status == 1:  # git's answer for "no common ancestor"
                return None
            raise GitError(f"cannot find the merge base of {a[:12]} and {b[:12]}: {self._why(e)}") from e
        except (git.GitError, OSError) as e:
            raise GitError(f"cannot find the merge base of {a[:12]} and {b[:12]}: {self._why(e)}") from e
        return str(out).strip() or None

    def has_branch(self, branch: str) -> bool:
        try:
            self.head(branch)
        except GitError:
            return False
        return True

    def _why(self, e: BaseException) -> str:
        """The end of git's message, without credentials (the one path of every git error)."""
        return self.remote.redact(_short(e))

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
