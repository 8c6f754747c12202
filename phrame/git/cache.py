"""The clone cache: one bare clone of the config repo, fetched and read without checkout.

Used by config-sync (fetch, head, merge_base, load), placement (through
:class:`phrame.git.writing.GitWriter`) and ``phrame plan`` (:func:`merge_base`). It only
fetches: nothing here writes to the remote. Branches, GitLab MR heads and tags come in
with forced refspecs and ``--prune`` (``phrame.git.refs``). Credentials and a private CA
reach git through its environment only (``phrame.settings.git_remote``), every message is
redacted, the cache's ``origin`` follows the URL setting (checked with git once per URL),
and git is killed after ``timeout_s`` (PHRAME_GIT_TIMEOUT_S). Every Repo is closed after
use: an open one keeps ``git cat-file`` processes alive until garbage collection. Refs are
resolved and commits read for loading through one long-lived ``git cat-file``
(:class:`phrame.git.objects.ObjectReader`): a sync starts no git process besides its fetch.
"""

from __future__ import annotations

import logging
import os
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import git
from gitdb.exc import BadName, BadObject

from phrame.config_repo import ConfigRepo, Problem, ReadCache, load
from phrame.git import refs
from phrame.git.errors import GitError, RefMissing
from phrame.git.objects import CommitSource, ObjectReader
from phrame.settings.git_remote import GitRemote, follow_origin, hint
from phrame.settings.state import private_dir

log = logging.getLogger(__name__)
MAINTAIN_EVERY = 50  # fetches: the first of each 50 lets git check whether to pack
COMMIT_TEXT_MAX = 200  # characters of a commit's author or message line kept for people


class GitCache:
    """A bare clone of ``url`` at ``path``; thread-safe (one fetch or push at a time)."""

    def __init__(
        self,
        url: str,
        path: str | Path,
        *,
        token: str | None = None,
        ca_file: str | Path | None = None,
        timeout_s: float = 120.0,
    ) -> None:
        self.remote = GitRemote.parse(url, token=token, ca_file=ca_file)
        self.url = self.remote.url  # without credentials: safe to show
        self.path = Path(path)
        self.timeout_s = timeout_s
        self._lock = threading.RLock()
        # refs, listings and blobs for sync passes: one git process for the cache's life
        self.objects = ObjectReader(self.path)
        self._origin: str | None = None  # the URL origin was last seen to point at
        self._fetches = 0

    @contextmanager
    def opened(self) -> Iterator[git.Repo]:
        """The cache's Repo (created on first use), closed on exit; ``origin`` follows the URL."""
        with self._prepared(), self.reading() as repo:
            yield repo

    @contextmanager
    def _prepared(self) -> Iterator[None]:
        """Locked: the cache exists (created on first use) and ``origin`` follows the URL."""
        with self._lock:
            try:
                private_dir(self.path.parent)  # <state>/<service>: 0700, tightened once if looser
                if not (self.path / "HEAD").is_file():
                    self.objects.close()  # it read a repository that is gone
                    self._origin = None
                    self.path.mkdir(parents=True, exist_ok=True)
                    git.Repo.init(self.path, bare=True).close()
                    log.info("created the clone cache %s for %s", self.path, self.url)
                # a URL changed since the cache was made takes effect, and the "+" refspecs
                # with --prune then replace every old ref; asked of git once per URL
                old = None
                if self._origin != self.remote.url:
                    old = follow_origin(self.path, self.remote)
                    self._origin = self.remote.url
            except (git.GitError, OSError) as e:
                raise GitError(f"cannot open the clone cache {self.path}: {self.why(e)}") from e
            if old is not None:
                log.info("repository URL changed from %s to %s", old, self.url)
            yield

    @contextmanager
    def reading(self) -> Iterator[git.Repo]:
        """The existing cache's Repo for reads (no remote, no `git config`), closed on exit.
        Not locked: git updates refs atomically, so a read racing a fetch sees old or new."""
        try:
            repo = git.Repo(self.path)
        except (git.GitError, OSError) as e:
            raise GitError(f"cannot open the clone cache {self.path}: {self.why(e)}") from e
        with repo:
            yield repo

    def fetch(self) -> None:
        """Bring every branch, MR head and tag up to date, pruning deleted ones."""
        with self._prepared():
            try:
                # --no-tags: tags come through their forced refspec only; git runs in the
                # bare cache (no Repo object: nothing of it is read here)
                # git's own housekeeping (`git maintenance run --auto`: packing what fetches
                # left loose) is a process of its own: asked for once every MAINTAIN_EVERY
                self._fetches += 1
                maintain = [] if self._fetches % MAINTAIN_EVERY == 1 else ["--no-auto-maintenance"]
                git.Git(str(self.path)).fetch(
                    "--prune",
                    "--no-tags",
                    "--quiet",
                    *maintain,
                    "origin",
                    *refs.REFSPECS,
                    env=self.remote.env(),
                    kill_after_timeout=self.timeout_s,
                )
            except (git.GitError, OSError) as e:
                if timed_out(e):
                    raise GitError(
                        f"fetching {self.url} {self.timeout_message()}, the next pass tries again"
                    ) from e
                why = f"{self.why(e)}{hint(str(e), 'read_repository')}"
                raise GitError(f"cannot fetch {self.url} into {self.path}: {why}") from e

    def resolve(self, name: str) -> str | None:
        """The commit a local ref of the cache points at (tags peeled), or None. A cache
        that cannot be read is a (transient) GitError."""
        return self.objects.commit_of(name)

    def head(self, ref: str) -> str:
        """The commit ``ref`` (``main``, ``refs/heads/main``, ``refs/tags/v1``) points to as
        last fetched; ``RefMissing`` when absent (see ``phrame.git.refs``)."""
        for name in refs.local_candidates(ref):
            sha = self.resolve(name)
            if sha is not None:
                return sha
        raise RefMissing(f"{refs.describe(ref)} not found in {self.url}")

    def branch_head(self, branch: str) -> str | None:
        """Sha of remote branch ``branch`` as last fetched, or None if it does not exist."""
        return self.resolve(refs.remote_branch(branch))

    def has_branch(self, branch: str) -> bool:
        return self.branch_head(branch) is not None

    def branches_under(self, folder: str) -> list[str]:
        """Remote branches whose name starts with ``folder`` (``image-update/lab/web/``), as
        last fetched, sorted."""
        prefix = refs.remote_branch(folder)
        with self.reading() as repo:
            try:
                out = repo.git.for_each_ref("--format=%(refname)", prefix)
            except (git.GitError, OSError) as e:
                raise GitError(f"cannot list {prefix}* in {self.path}: {self.why(e)}") from e
        return sorted(line.removeprefix(refs.REMOTE) for line in out.splitlines() if line.startswith(prefix))

    def is_tag(self, ref: str) -> bool:
        """Whether ``ref`` reads as a tag (``refs/tags/x``, or a short name with no such branch)."""
        candidates = refs.local_candidates(ref)
        found = next((name for name in candidates if self.resolve(name) is not None), candidates[0])
        return refs.is_tag_name(found)

    def read_file(self, sha: str, path: str) -> bytes | None:
        """The file at ``path`` in commit ``sha``, or None when the commit has no such file."""
        with self.reading() as repo:
            try:
                blob = repo.commit(sha).tree / path
                data: bytes = blob.data_stream.read()
            except KeyError:
                return None
            except (git.GitError, ValueError, BadName, BadObject) as e:
                raise GitError(f"cannot read {path} at {sha[:12]}: {self.why(e)}") from e
        return data

    def files_under(self, sha: str, folder: str) -> dict[str, bytes]:
        """Every file under ``folder`` (``environments/lab``) in commit ``sha``: path -> content
        (empty when the folder is absent). Symlinks and submodules are not config: skipped."""
        prefix = folder.strip("/") + "/"
        out: dict[str, bytes] = {}
        with self.reading() as repo:
            try:
                try:
                    tree = repo.commit(sha).tree / prefix.rstrip("/")
                except KeyError:
                    return {}
                for item in tree.traverse():
                    if isinstance(item, git.Blob) and item.mode & 0o170000 == 0o100000:
                        out[str(item.path)] = item.data_stream.read()
            except (git.GitError, ValueError, BadName, BadObject) as e:
                raise GitError(f"cannot read {prefix} at {sha[:12]}: {self.why(e)}") from e
        return out

    def commit_info(self, sha: str) -> tuple[str, str]:
        """``("Name <email>", first line of the message)`` of fetched commit ``sha``, as
        git holds them (a webhook's copy can be forged or missing); each capped at 200
        characters."""
        with self.reading() as repo:
            try:
                commit = repo.commit(sha)
                author = f"{commit.author.name} <{commit.author.email}>"
                message = commit.message
            except (git.GitError, ValueError, BadName, BadObject) as e:
                raise GitError(f"cannot read commit {sha[:12]}: {self.why(e)}") from e
        text = message.decode("utf-8", "replace") if isinstance(message, bytes) else message
        first = text.strip().splitlines()[0].strip() if text.strip() else ""
        return author[:COMMIT_TEXT_MAX], first[:COMMIT_TEXT_MAX]

    def first_parent(self, sha: str) -> str | None:
        """The first parent of fetched commit ``sha`` (None for a root commit)."""
        with self.reading() as repo:
            try:
                parents = repo.commit(sha).parents
            except (git.GitError, ValueError, BadName, BadObject) as e:
                raise GitError(f"cannot read commit {sha[:12]}: {self.why(e)}") from e
        return str(parents[0].hexsha) if parents else None

    def merge_base(self, a: str, b: str) -> str | None:
        """The best common ancestor of two fetched commits; None for unrelated histories."""
        with self.reading() as repo:
            try:
                return merge_base_in(repo, a, b)
            except (git.GitError, OSError) as e:
                raise GitError(f"cannot find the merge base of {a[:12]} and {b[:12]}: {self.why(e)}") from e

    def is_ancestor(self, ancestor: str, sha: str) -> bool:
        with self.reading() as repo:
            try:
                repo.git.merge_base("--is-ancestor", ancestor, sha)
            except git.GitCommandError:
                return False
        return True

    def load(self, sha: str, *, cache: ReadCache | None = None) -> tuple[ConfigRepo, list[Problem]]:
        """The repository's tree at ``sha`` (read from objects, no checkout)."""
        return load(CommitSource(self.objects, sha), cache=cache)

    def timeout_message(self) -> str:
        return f"timed out after {self.timeout_s:g} s (PHRAME_GIT_TIMEOUT_S); git was stopped"

    def why(self, e: BaseException) -> str:
        """The end of git's message without credentials: the one path of every git error."""
        return self.remote.redact(short(e))


def merge_base_in(repo: git.Repo, a: str, b: str) -> str | None:
    """The one merge-base of the project: None when git says there is no common ancestor."""
    try:
        out = repo.git.merge_base(a, b)
    except git.GitCommandError as e:
        if e.status == 1:  # git's answer for "no common ancestor"
            return None
        raise
    return str(out).strip() or None


def merge_base(repo_path: str | os.PathLike[str], a: str, b: str) -> str | None:
    """For ``phrame plan``: the merge base in the repository holding ``repo_path``; None when
    the histories are unrelated, a ref is unknown or there is no repository."""
    try:
        with git.Repo(repo_path, search_parent_directories=True) as repo:
            return merge_base_in(repo, a, b)
    except (git.GitError, OSError, ValueError):  # no repository, or a ref git does not know
        return None


def timed_out(e: BaseException) -> bool:
    """Whether ``kill_after_timeout`` stopped the command. gitpython says so in its stderr,
    but only when its watchdog marked the kill before the command's end was read: it kills
    first and marks after, so on a busy machine the error is git's bare SIGKILL (status -9)."""
    if not isinstance(e, git.GitCommandError):
        return False
    return "did not complete in" in str(e.stderr) or e.status == -signal.SIGKILL


def short(e: BaseException) -> str:
    if isinstance(e, git.GitCommandError) and e.stderr:
        # all of stderr: GitLab's reason ("not allowed to push ...") may precede git's last line
        lines = str(e.stderr).strip().replace("stderr: ", "").strip("'\n ").splitlines()
    else:
        lines = str(e).strip().splitlines()[-3:]
    return " ".join(line.strip() for line in lines)[:500] if lines else type(e).__name__
