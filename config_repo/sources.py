"""Where a repository's files come from: a directory, or a git commit read without checkout.

Reading from git uses tree objects (no work tree), so two reads at different commits of
the same repository never interfere. Sizes are known before content is read, so an
oversized file is refused without loading it.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Protocol

from config_repo.problems import ConfigError

MAX_FILE_BYTES = 1024 * 1024


class Source(Protocol):
    commit: str | None

    def files(self) -> Iterator[tuple[str, int]]:
        """(repo-relative POSIX path, size in bytes) of every file, sorted by path."""
        ...

    def read(self, path: str) -> bytes: ...

    def content_id(self, path: str) -> str | None:
        """An id that changes whenever the content does (a blob sha), or None if unknown."""
        ...


class DirectorySource:
    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root)
        if not self.root.is_dir():
            raise ConfigError(f"{self.root}: not a directory")
        self.commit: str | None = None

    def files(self) -> Iterator[tuple[str, int]]:
        found = []
        for dirpath, dirnames, filenames in os.walk(self.root):
            dirnames[:] = [d for d in dirnames if d != ".git"]
            for name in filenames:
                full = Path(dirpath, name)
                found.append((full.relative_to(self.root).as_posix(), full.stat().st_size))
        yield from sorted(found)

    def read(self, path: str) -> bytes:
        return (self.root / path).read_bytes()

    def content_id(self, path: str) -> str | None:
        return None  # files on disk change in place: never cached


class GitSource:
    """Files of ``ref`` in the git repository at ``repo_path`` (bare or not)."""

    def __init__(self, repo_path: str | os.PathLike[str], ref: str = "HEAD") -> None:
        import git  # adapter-only import: gitpython
        import gitdb.exc

        try:
            self.repo = git.Repo(repo_path)
        except (git.exc.GitError, OSError) as e:
            raise ConfigError(f"{repo_path}: not a git repository") from e
        try:
            commit = self.repo.commit(ref)
        except (git.exc.GitError, gitdb.exc.ODBError, ValueError) as e:
            # an unknown ref is gitdb's BadName, which is no GitError
            raise ConfigError(f"{repo_path}: no commit for ref {ref!r}") from e
        self.commit: str | None = commit.hexsha
        self._blobs: dict[str, Any] = {
            str(getattr(item, "path", "")): item
            for item in commit.tree.traverse()
            if getattr(item, "type", None) == "blob"
        }

    def files(self) -> Iterator[tuple[str, int]]:
        for path in sorted(self._blobs):
            yield path, int(self._blobs[path].size)

    def read(self, path: str) -> bytes:
        data: bytes = self._blobs[path].data_stream.read()
        return data

    def content_id(self, path: str) -> str | None:
        return str(self._blobs[path].hexsha)
