"""The git adapter of the placement reconciler: a bare clone cache, fetch, commit, push.

Commits are built with plumbing on top of an explicit parent sha (no work tree, no
checkout), and pushed without force: the push only fast-forwards, so it is a
compare-and-swap on the branch and a rejection means someone committed meanwhile. It
never writes to ``refs/tags/*``. Fetch and push are killed after ``timeout_s``
(PHRAME_GIT_TIMEOUT_S). A GitLab token, credentials pasted into PHRAME_REPO_URL and a
private CA reach git through its environment, never argv, the URL on disk or a message
(``phrame_settings.git_remote``); the cache's ``origin`` follows the URL setting before
every fetch. The only module of the package that imports gitpython.
"""

from __future__ import annotations

import logging
import os
import tempfile
from io import BytesIO
from pathlib import Path

import git
from gitdb import IStream

from phrame_settings.git_remote import GitRemote, follow_origin, hint
from phrame_settings.state import private_dir
from placement.errors import GitError, PushRejected, TagTargetError

log = logging.getLogger(__name__)

AUTHOR = ("phrame-placement", "placement@phrame.invalid")


def branch_ref(branch: str) -> str:
    """``main`` → ``refs/heads/main``; any ``refs/tags/*`` target raises :class:`TagTargetError`."""
    if branch.startswith("refs/tags/"):
        raise TagTargetError(
            f"refusing to write placement to {branch}: placement never writes to a tag; "
            "track a branch, or use placement: review (which pushes its own branch)"
        )
    if branch.startswith("refs/") and not branch.startswith("refs/heads/"):
        raise GitError(f"refusing to write placement to {branch}: only branches (refs/heads/*) are written")
    return branch if branch.startswith("refs/heads/") else f"refs/heads/{branch}"


class GitRepo:
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
        self.remote = GitRemote.parse(url, token=token, ca_file=ca_file)
        self.url = self.remote.url  # without credentials: safe to show
        self.cache = cache
        self.author = author
        self.timeout_s = timeout_s
        self._repo: git.Repo | None = None

    @property
    def repo(self) -> git.Repo:
        if self._repo is None:
            try:
                private_dir(self.cache.parent)  # <state>/placement: 0700, tightened once if looser
                if (self.cache / "HEAD").exists():
                    self._repo = git.Repo(self.cache)
                else:
                    self.cache.mkdir(parents=True, exist_ok=True)
                    self._repo = git.Repo.init(self.cache, bare=True)
                self._follow_origin()
            except (git.exc.GitError, OSError) as e:
                self._repo = None
                raise GitError(
                    f"cannot open the clone cache {self.cache}: {self.remote.redact(str(e))}"
                ) from e
        return self._repo

    def _follow_origin(self) -> None:
        # cheap (one `git config`): a URL changed since the cache was made takes effect, and
        # the "+" refspecs with --prune then replace every ref of the old remote
        old = follow_origin(self.cache, self.remote)
        if old is not None:
            log.info("repository URL changed from %s to %s", old, self.url)

    @property
    def path(self) -> Path:
        return self.cache

    def fetch(self) -> None:
        repo = self.repo
        try:
            self._follow_origin()
        except OSError as e:
            raise GitError(f"cannot open the clone cache {self.cache}: {self.remote.redact(str(e))}") from e
        try:
            repo.git.fetch(
                "--prune",
                "origin",  # "+" updates our remote-tracking refs only; nothing is ever force-pushed
                "+refs/heads/*:refs/remotes/origin/*",
                "+refs/tags/*:refs/tags/*",
                env=self.remote.env(),
                kill_after_timeout=self.timeout_s,
            )
        except git.exc.GitCommandError as e:
            raise GitError(f"cannot fetch {self.url}: {self._why(e)}") from e

    def is_tag(self, ref: str) -> bool:
        """Whether ``ref`` names a tag (``refs/tags/x``, or a short name with no such branch)."""
        if ref.startswith("refs/tags/"):
            return True
        if ref.startswith("refs/"):
            return False
        return (
            self._resolve(f"refs/remotes/origin/{ref}") is None
            and self._resolve(f"refs/tags/{ref}") is not None
        )

    def head(self, ref: str) -> str:
        """The commit sha ``ref`` (a branch or tag of the remote, as last fetched) points at."""
        if ref.startswith("refs/heads/"):
            candidates = [f"refs/remotes/origin/{ref[len('refs/heads/') :]}"]
        elif ref.startswith("refs/tags/"):
            candidates = [ref]
        else:
            candidates = [f"refs/remotes/origin/{ref}", f"refs/tags/{ref}"]
        for name in candidates:
            sha = self._resolve(name)
            if sha is not None:
                return sha
        raise GitError(f"{self.url} has no branch or tag {ref!r}")

    def branch_head(self, branch: str) -> str | None:
        """Sha of remote branch ``branch`` as last fetched, or ``None`` if it does not exist."""
        return self._resolve(f"refs/remotes/origin/{branch}")

    def read_file(self, sha: str, path: str) -> bytes | None:
        try:
            blob = self.repo.commit(sha).tree / path
        except KeyError:
            return None
        except (git.exc.GitError, ValueError) as e:
            raise GitError(f"cannot read {path} at {sha[:12]}: {self.remote.redact(str(e))}") from e
        data: bytes = blob.data_stream.read()
        return data

    def is_ancestor(self, ancestor: str, sha: str) -> bool:
        try:
            self.repo.git.merge_base("--is-ancestor", ancestor, sha)
        except git.exc.GitCommandError:
            return False
        return True

    def commit_file(self, parent: str, path: str, content: bytes, message: str) -> str:
        """A new commit whose parent is ``parent`` and whose tree is ``parent``'s with
        ``path`` set to ``content``. Touches no branch; returns the new sha."""
        name, email = self.author
        env = dict(
            os.environ,
            GIT_AUTHOR_NAME=name,
            GIT_AUTHOR_EMAIL=email,
            GIT_COMMITTER_NAME=name,
            GIT_COMMITTER_EMAIL=email,
        )
        with tempfile.TemporaryDirectory(prefix="phrame-placement-index-") as tmp:
            env["GIT_INDEX_FILE"] = str(Path(tmp, "index"))
            g = self.repo.git
            try:
                g.read_tree(parent, env=env)
                blob = self.repo.odb.store(IStream("blob", len(content), BytesIO(content)))
                g.update_index("--add", "--cacheinfo", f"100644,{blob.hexsha.decode()},{path}", env=env)
                tree = g.write_tree(env=env)
                sha: str = g.commit_tree(tree, "-p", parent, "-m", message, env=env)
            except (git.exc.GitError, ValueError) as e:
                raise GitError(f"cannot commit {path} on {parent[:12]}: {self.remote.redact(str(e))}") from e
        return sha.strip()

    def push(self, sha: str, branch: str) -> None:
        """Fast-forward ``branch`` on the remote to ``sha``; never forced.

        Raises :class:`PushRejected` when the branch moved since it was read (fetch,
        recompute, retry) and :class:`TagTargetError` for a tag."""
        target = branch_ref(branch)
        try:
            self.repo.git.push(
                "--porcelain",
                "origin",
                f"{sha}:{target}",
                env=self.remote.env(),
                kill_after_timeout=self.timeout_s,
            )
        except git.exc.GitCommandError as e:
            text = f"{e.stdout or ''}\n{e.stderr or ''}"
            if "[rejected]" in text or "non-fast-forward" in text or "fetch first" in text:
                raise PushRejected(f"push of {sha[:12]} to {target} rejected: the branch moved") from e
            raise GitError(f"cannot push {sha[:12]} to {target} on {self.url}: {self._why(e)}") from e
        log.info("pushed %s to %s", sha[:12], target)

    def _resolve(self, name: str) -> str | None:
        try:
            return str(self.repo.commit(name).hexsha)
        except (git.exc.BadName, git.exc.GitError, ValueError):
            return None

    def _why(self, e: git.exc.GitCommandError) -> str:
        if "did not complete in" in str(e.stderr):  # gitpython killed it (kill_after_timeout)
            return f"timed out after {self.timeout_s:g} s (PHRAME_GIT_TIMEOUT_S); git was stopped"
        text = self.remote.redact(_stderr(e))  # the one path of every git error: no credentials
        return text + hint(text, "write_repository")


def _stderr(e: git.exc.GitCommandError) -> str:
    return str(e.stderr or e).strip().replace("stderr: ", "").strip("'\n ")[:500]
