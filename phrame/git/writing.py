"""Writing to the config repo: a commit built on an explicit parent, pushed as a compare-and-swap.

Placement writes its decisions; the topic API pushes a compose import to a new branch
of its own (never the tracked one). Commits are built with plumbing on top of a given parent sha (a
temporary index, no work tree, no checkout) and pushed without force: the push only
fast-forwards, so a rejection means the branch moved since it was read (``PushRejected``:
fetch, recompute, retry). Never writes to ``refs/tags/*`` or outside ``refs/heads/*``
(``phrame.git.refs.writable_ref``). Push shares the cache's credentials, redaction and timeout.
"""

from __future__ import annotations

import logging
import os
import tempfile
from collections.abc import Mapping
from io import BytesIO
from pathlib import Path

import git
from gitdb import IStream

from phrame.git import refs
from phrame.git.cache import GitCache, timed_out
from phrame.git.errors import GitError, PushRejected
from phrame.settings.git_remote import hint

log = logging.getLogger(__name__)


class GitWriter(GitCache):
    """A :class:`GitCache` that can also commit files and push them to a branch."""

    author: tuple[str, str] = ("phrame-placement", "placement@phrame.invalid")

    def commit_file(self, parent: str, path: str, content: bytes, message: str) -> str:
        """A new commit whose parent is ``parent`` and whose tree is ``parent``'s with
        ``path`` set to ``content``. Touches no branch; returns the new sha."""
        return self.commit_files(parent, {path: content}, message)

    def commit_files(self, parent: str, files: Mapping[str, bytes | None], message: str) -> str:
        """One new commit on ``parent`` whose tree is ``parent``'s with each path of
        ``files`` set to its content, or removed where the content is None (the topic API's
        compose import writes several at once; a rollback also deletes). Touches no branch;
        returns the new sha. ValueError for no files."""
        if not files:
            raise ValueError("no files to commit")
        name, email = self.author
        env = dict(
            os.environ,
            GIT_AUTHOR_NAME=name,
            GIT_AUTHOR_EMAIL=email,
            GIT_COMMITTER_NAME=name,
            GIT_COMMITTER_EMAIL=email,
        )
        what = next(iter(files)) if len(files) == 1 else f"{len(files)} files"
        with tempfile.TemporaryDirectory(prefix="phrame-git-index-") as tmp, self.reading() as repo:
            env["GIT_INDEX_FILE"] = str(Path(tmp, "index"))
            g = repo.git
            try:
                g.read_tree(parent, env=env)
                gone = [path for path, content in files.items() if content is None]
                if gone:  # mode 0 removes an entry; --force-remove would want a work tree
                    listing = Path(tmp, "removed")
                    listing.write_text("".join(f"0 {'0' * 40}\t{path}\n" for path in gone))
                    with listing.open("rb") as removed:
                        g.update_index("--index-info", istream=removed, env=env)
                for path, content in files.items():
                    if content is None:
                        continue
                    blob = repo.odb.store(IStream("blob", len(content), BytesIO(content)))
                    g.update_index("--add", "--cacheinfo", f"100644,{blob.hexsha.decode()},{path}", env=env)
                tree = g.write_tree(env=env)
                # from a file: a message may pass the kernel's 128 KiB limit on one argument
                # (placement lists every move; a lost shard of 1,000 nodes is that long)
                listing = Path(tmp, "message")
                listing.write_text(message, "utf-8")
                sha: str = g.commit_tree(tree, "-p", parent, "-F", str(listing), env=env)
            except (git.GitError, ValueError) as e:
                raise GitError(f"cannot commit {what} on {parent[:12]}: {self.why(e)}") from e
        return sha.strip()

    def push(self, sha: str, branch: str) -> None:
        """Fast-forward ``branch`` on the remote to ``sha``; never forced.

        ``PushRejected`` when the branch moved since it was read, ``TagTargetError`` for a tag."""
        target = refs.writable_ref(branch)
        with self.opened() as repo:
            try:
                repo.git.push(
                    "--porcelain",
                    "origin",
                    f"{sha}:{target}",  # no "+": a non-fast-forward is refused by the remote
                    env=self.remote.env(),
                    kill_after_timeout=self.timeout_s,
                )
            except git.GitCommandError as e:
                text = f"{e.stdout or ''}\n{e.stderr or ''}"
                if "[rejected]" in text or "non-fast-forward" in text or "fetch first" in text:
                    raise PushRejected(f"push of {sha[:12]} to {target} rejected: the branch moved") from e
                if timed_out(e):
                    why = self.timeout_message()
                else:
                    why = self.why(e)
                    why += hint(why, "write_repository")
                raise GitError(f"cannot push {sha[:12]} to {target} on {self.url}: {why}") from e
        log.info("pushed %s to %s", sha[:12], target)
