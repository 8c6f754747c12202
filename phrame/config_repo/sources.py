"""Where a repository's files come from: a directory, or a git commit read without checkout.

Reading from git uses tree objects (no work tree), so two reads at different commits of
the same repository never interfere. Sizes are known before content is read, and a read
never returns more than ``MAX_FILE_BYTES + 1`` bytes, so an oversized file is refused
without loading it. Never follows a link: symlinks, devices, fifos and git submodules are
listed but their ``read`` raises :class:`NotAFile`, which the loader reports.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import NoReturn, Protocol

from phrame.config_repo.problems import ConfigError

MAX_FILE_BYTES = 1024 * 1024
LAYOUT_FOLDERS = ("nodes", "environments")
GIT_LINK_MODE = 0o120000  # a symlink in a git tree: a blob holding the link's target


class NotAFile(ConfigError):
    """``read`` of an entry that is no regular file; ``what`` says what it is instead."""

    def __init__(self, path: str, what: str) -> None:
        self.path = path
        self.what = what
        super().__init__(f"{path}: {what}, not a regular file")


class Source(Protocol):
    commit: str | None

    def files(self) -> Iterator[tuple[str, int]]:
        """(repo-relative POSIX path, size in bytes) of every entry, sorted by path."""
        ...

    def read(self, path: str) -> bytes:
        """At most ``MAX_FILE_BYTES + 1`` bytes; raises :class:`NotAFile` for a non-regular entry."""
        ...

    def content_id(self, path: str) -> str | None:
        """An id that changes whenever the content does (a blob sha), or None if unknown."""
        ...


def _special(mode: int) -> str | None:
    """What a non-regular file system entry is, or None for a regular file."""
    if stat.S_ISREG(mode):
        return None
    kinds = ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a fifo"), (stat.S_ISSOCK, "a socket"))
    return next((what for test, what in kinds if test(mode)), "a device")


def _unreadable(path: str, e: OSError) -> NoReturn:
    raise ConfigError(f"{path}: cannot read: {e.strerror or e}") from e


class DirectorySource:
    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root)
        if not self.root.is_dir():
            raise ConfigError(f"{self.root}: not a directory")
        self.commit: str | None = None

    def has_layout(self) -> bool:
        """Whether ``nodes/`` or ``environments/`` exists (a config repo, not some folder)."""
        return any((self.root / d).is_dir() for d in LAYOUT_FOLDERS)

    def files(self) -> Iterator[tuple[str, int]]:
        found = []

        def walk_error(e: OSError) -> None:
            # os.walk skips an unreadable folder by default: its files would vanish silently
            _unreadable(str(e.filename), e)

        for dirpath, dirnames, filenames in os.walk(self.root, onerror=walk_error):
            # a symlinked folder is listed like a file (so it is reported), never walked into
            links = [d for d in dirnames if Path(dirpath, d).is_symlink()]
            dirnames[:] = [d for d in dirnames if d != ".git" and d not in links]
            for name in [*filenames, *links]:
                full = Path(dirpath, name)
                try:
                    size = full.lstat().st_size  # the link itself: a dangling one is no error here
                except FileNotFoundError:
                    continue  # removed since the listing
                found.append((full.relative_to(self.root).as_posix(), size))
        yield from sorted(found)

    def read(self, path: str) -> bytes:
        full = self.root / path
        try:
            if full.is_symlink():
                raise NotAFile(path, f"a symbolic link to {os.readlink(full)}")
            what = _special(full.lstat().st_mode)
            if what is not None:  # never opened: opening a device or fifo can block or act
                raise NotAFile(path, what)
            # O_NOFOLLOW and fstat: the entry may have been swapped for a link since lstat
            fd = os.open(full, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
            with os.fdopen(fd, "rb") as f:
                what = _special(os.fstat(f.fileno()).st_mode)
                if what is not None:
                    raise NotAFile(path, what)
                return f.read(MAX_FILE_BYTES + 1)
        except NotAFile:
            raise
        except OSError as e:
            _unreadable(path, e)

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
        # one `git ls-tree -r -l` for every entry with its mode, blob and size: GitPython's
        # tree walk asks git for each blob's size on its own (one round trip per file,
        # most of an incremental sync of 2,000 files)
        listing = self.repo.git.ls_tree("-r", "-l", "-z", "--full-tree", self.commit, stdout_as_string=False)
        self._blobs: dict[str, tuple[int, str, int]] = {}  # path -> (mode, blob sha, size)
        self._submodules: set[str] = set()
        for entry in listing.split(b"\0"):
            if not entry:
                continue
            meta, _, raw_path = entry.partition(b"\t")
            mode, kind, sha, size = meta.split()
            path = raw_path.decode("utf-8", "surrogateescape")  # as GitPython names tree entries
            if kind == b"blob":
                self._blobs[path] = (int(mode, 8), sha.decode("ascii"), int(size))
            elif kind == b"commit":  # a gitlink: a commit of another repository, no content
                self._submodules.add(path)
        self._top = {path.split("/", 1)[0] for path in (*self._blobs, *self._submodules)}

    def has_layout(self) -> bool:
        """Whether the commit holds ``nodes/`` or ``environments/``."""
        return any(d in self._top for d in LAYOUT_FOLDERS)

    def _is_link(self, path: str) -> bool:
        return path in self._blobs and self._blobs[path][0] == GIT_LINK_MODE

    def files(self) -> Iterator[tuple[str, int]]:
        sizes = {path: size for path, (_mode, _sha, size) in self._blobs.items()}
        sizes.update(dict.fromkeys(self._submodules, 0))
        yield from sorted(sizes.items())

    def read(self, path: str) -> bytes:
        if path in self._submodules:
            raise NotAFile(path, "a git submodule")
        data: bytes = self.repo.odb.stream(bytes.fromhex(self._blobs[path][1])).read(MAX_FILE_BYTES + 1)
        if self._is_link(path):  # the blob is the link's target, not the file's content
            target = data.decode("utf-8", "replace")
            raise NotAFile(path, f"a symbolic link to {target}")
        return data

    def content_id(self, path: str) -> str | None:
        if path in self._submodules or self._is_link(path):
            return None  # a link's blob can equal a file's: never share a parse with it
        return self._blobs[path][1]
