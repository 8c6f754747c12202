"""One long-lived ``git cat-file --batch-command`` per clone cache: refs resolved, trees listed
and blobs read without starting a git process for each.

An incremental sync of a 2,000-file repository started four git processes besides its
fetch (a ``cat-file`` to resolve the ref, another to find the commit, ``ls-tree`` to list
it and a ``cat-file`` to read the changed blob), which took more time than the reading
itself. Here one process answers every request over its pipes, and what git's objects
make certain is kept: a tree of a given sha always lists the same entries, a blob of a
given sha always has the same size, so a commit that changed one file reads the trees on
that file's path and that blob only.

The process reads objects only; refs are resolved anew on every request (git reads loose
refs and a changed ``packed-refs`` each time), and objects a fetch adds are found (git
looks again for new packs when an object is missing). A process that died, or an answer
that cannot be parsed, is a :class:`GitError`; the next request starts a new process.
Thread-safe: one request at a time.
"""

from __future__ import annotations

import subprocess
import threading
import weakref
from collections import OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from phrame.config_repo.problems import ConfigError
from phrame.config_repo.sources import MAX_FILE_BYTES, NotAFile
from phrame.git.errors import GitError

TREE_MODE, LINK_MODE, GITLINK_MODE = 0o040000, 0o120000, 0o160000
TREES_KEPT = 200_000  # paths of listed trees kept (a 2,000-file repository's folders, ~40 commits)
SIZES_KEPT = 1 << 17  # blob sizes kept by sha
ASK_AT_ONCE = 256  # `info` requests written before their answers are read (well under a pipe)


@dataclass(frozen=True)
class Entry:
    """A file of a commit's listing: its git mode, blob sha and size (0 for a gitlink)."""

    mode: int
    sha: str
    size: int


class _Bounded(OrderedDict[Any, Any]):
    """Least recently used first out, once the weights of what it holds pass ``limit``."""

    def __init__(self, limit: int) -> None:
        super().__init__()
        self.limit = limit
        self._weights: dict[Any, int] = {}
        self._total = 0

    def keep(self, key: Any, value: Any, weight: int = 1) -> None:
        self._total += weight - self._weights.get(key, 0)
        self._weights[key] = weight
        self[key] = value
        self.move_to_end(key)
        while self._total > self.limit and len(self) > 1:
            old, _ = self.popitem(last=False)
            self._total -= self._weights.pop(old)


def _tree_entries(data: bytes) -> list[tuple[int, str, str]]:
    """(mode, name, sha) of a raw tree object: ``<octal mode> <name>\\0<20-byte sha>`` each."""
    out, at, end = [], 0, len(data)
    while at < end:
        space = data.index(b" ", at)
        nul = data.index(b"\0", space)
        mode = int(data[at:space], 8)
        name = data[space + 1 : nul].decode("utf-8", "surrogateescape")  # as git ls-tree names it
        out.append((mode, name, data[nul + 1 : nul + 21].hex()))
        at = nul + 21
    return out


def _one_line(name: str) -> bool:
    """Whether ``name`` can be asked for: a request is one line, nothing in it may start another."""
    return bool(name) and not any(c in name for c in "\n\r\0") and not name.startswith("-")


def _discard(proc: subprocess.Popen[bytes]) -> None:
    """End ``proc`` (closing its stdin ends ``git cat-file``) and close its pipes."""
    try:
        if proc.stdin is not None:
            proc.stdin.close()
    except OSError:  # a broken pipe: it is gone already
        pass
    try:
        proc.wait(5)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    if proc.stdout is not None:
        proc.stdout.close()


class ObjectReader:
    """Reads the objects of the repository at ``git_dir`` through one ``git cat-file`` process."""

    def __init__(self, git_dir: str | Path) -> None:
        self.git_dir = Path(git_dir)
        self._lock = threading.Lock()
        self._proc: subprocess.Popen[bytes] | None = None
        self._trees = _Bounded(TREES_KEPT)  # (tree sha, its path) -> {path: Entry}
        self._sizes = _Bounded(SIZES_KEPT)  # blob sha -> size
        self.started = 0  # processes started (a test reads it: one serves many syncs)

    # -- the process
    def _pipes(self) -> tuple[IO[bytes], IO[bytes]]:
        proc = self._proc
        if proc is not None and proc.poll() is not None:
            _discard(proc)  # it died (killed, or the repository went away): start another
            proc = None
        if proc is None:
            proc = self._proc = subprocess.Popen(
                ["git", "--git-dir", str(self.git_dir), "cat-file", "--batch-command"],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
            )
            self.started += 1
            # a reader dropped without close() ends its process when it is collected
            weakref.finalize(self, _discard, proc)
        assert proc.stdin is not None and proc.stdout is not None
        return proc.stdin, proc.stdout

    def close(self) -> None:
        """End the process (it also ends when its stdin closes with this one's exit)."""
        with self._lock:
            proc, self._proc = self._proc, None
        if proc is not None:
            _discard(proc)

    def _broken(self, why: str) -> GitError:
        proc, self._proc = self._proc, None
        if proc is not None:
            proc.kill()  # it may be stuck writing an answer nobody will read
            _discard(proc)
        return GitError(f"reading objects of {self.git_dir}: {why}")

    def _header(self, out: IO[bytes], asked: str) -> tuple[str, str, int] | None:
        """``(sha, type, size)`` of an answer, None when git says the object is missing."""
        line = out.readline()
        if not line.endswith(b"\n"):
            raise self._broken(f"git cat-file ended while answering {asked!r}")
        fields = line.split()
        if len(fields) == 2 and fields[1] in (b"missing", b"ambiguous"):
            return None
        if len(fields) != 3:
            raise self._broken(f"unexpected answer {line[:200]!r} to {asked!r}")
        return fields[0].decode("ascii"), fields[1].decode("ascii"), int(fields[2])

    def _ask(self, requests: list[str], *, contents: bool) -> list[tuple[str, str, bytes | int] | None]:
        """Answers in order: ``(sha, type, data)`` for ``contents``, ``(sha, type, size)`` for
        ``info``; None for a missing object. Lock held."""
        answers: list[tuple[str, str, bytes | int] | None] = []
        try:
            stdin, stdout = self._pipes()
            for start in range(0, len(requests), ASK_AT_ONCE):
                chunk = requests[start : start + ASK_AT_ONCE]
                verb = b"contents " if contents else b"info "
                stdin.write(b"".join(verb + name.encode() + b"\n" for name in chunk))
                stdin.flush()
                for name in chunk:
                    head = self._header(stdout, name)
                    if head is None:
                        answers.append(None)
                    elif contents:
                        data = stdout.read(head[2] + 1)  # the object and git's newline after it
                        if len(data) != head[2] + 1:
                            raise self._broken(f"git cat-file ended while sending {name!r}")
                        answers.append((head[0], head[1], data[:-1]))
                    else:
                        answers.append(head)
        except (OSError, ValueError) as e:
            raise self._broken(str(e)) from e
        return answers

    # -- what callers ask
    def commit_of(self, name: str) -> str | None:
        """The commit ``name`` (a ref, a sha) resolves to, tags peeled; None when there is none."""
        if not _one_line(name):
            return None
        with self._lock:
            found = self._ask([f"{name}^{{commit}}"], contents=False)[0]
        return found[0] if found is not None else None

    def listing(self, commit: str) -> dict[str, Entry]:
        """Every file of ``commit``'s tree: path -> :class:`Entry` (links and gitlinks included).
        :class:`ConfigError` when there is no such commit (as ``GitSource`` says it)."""
        with self._lock:
            found = self._ask([commit], contents=True)[0] if _one_line(commit) else None
            if found is None or found[1] != "commit":
                raise ConfigError(f"{self.git_dir}: no commit for ref {commit!r}")
            data = found[2]
            assert isinstance(data, bytes)
            if not data.startswith(b"tree "):
                raise self._broken(f"commit {commit[:12]} names no tree")
            return self._flat(data[5:45].decode("ascii"), "")

    def _flat(self, tree: str, prefix: str) -> dict[str, Entry]:
        """The files under ``tree`` (at ``prefix``), by path from the root (lock held); kept
        by tree sha and place: an unchanged folder is neither read nor listed again."""
        kept: dict[str, Entry] | None = self._trees.get((tree, prefix))
        if kept is not None:
            self._trees.move_to_end((tree, prefix))
            return kept
        found = self._ask([tree], contents=True)[0]
        if found is None or found[1] != "tree":
            raise self._broken(f"tree {tree[:12]} is missing")
        data = found[2]
        assert isinstance(data, bytes)
        entries = _tree_entries(data)
        blobs = (sha for mode, _name, sha in entries if mode not in (TREE_MODE, GITLINK_MODE))
        unknown = list(dict.fromkeys(sha for sha in blobs if sha not in self._sizes))
        for sha, answer in zip(unknown, self._ask(unknown, contents=False), strict=True):
            if answer is None:
                raise self._broken(f"blob {sha[:12]} of tree {tree[:12]} is missing")
            size = answer[2]
            assert isinstance(size, int)
            self._sizes.keep(sha, size)
        flat: dict[str, Entry] = {}
        for mode, name, sha in entries:
            if mode == TREE_MODE:
                flat.update(self._flat(sha, f"{prefix}{name}/"))
            else:
                size = 0 if mode == GITLINK_MODE else self._sizes[sha]
                flat[prefix + name] = Entry(mode, sha, size)
        self._trees.keep((tree, prefix), flat, weight=len(flat))
        return flat

    def read(self, sha: str, limit: int) -> bytes:
        """The blob ``sha``'s content; at most ``limit`` bytes are returned (never more read
        than its size: a caller checks the size from :meth:`listing` first)."""
        with self._lock:
            found = self._ask([sha], contents=True)[0]
        if found is None or found[1] != "blob":
            raise GitError(f"blob {sha[:12]} is missing from {self.git_dir}")
        data = found[2]
        assert isinstance(data, bytes)
        return data[:limit]


class CommitSource:
    """A commit's files through an :class:`ObjectReader`, for the config loader (the
    ``Source`` of ``phrame.config_repo.sources``, as ``GitSource`` reads them: links and
    gitlinks listed, never read; a blob's sha is its content id)."""

    def __init__(self, objects: ObjectReader, commit: str) -> None:
        self.objects = objects
        self.commit: str | None = commit
        self._entries = objects.listing(commit)

    def files(self) -> Iterator[tuple[str, int]]:
        yield from sorted((path, entry.size) for path, entry in self._entries.items())

    def read(self, path: str) -> bytes:
        entry = self._entries[path]
        if entry.mode == GITLINK_MODE:
            raise NotAFile(path, "a git submodule")
        data = self.objects.read(entry.sha, MAX_FILE_BYTES + 1)
        if entry.mode == LINK_MODE:  # the blob is the link's target, not the file's content
            raise NotAFile(path, f"a symbolic link to {data.decode('utf-8', 'replace')}")
        return data

    def content_id(self, path: str) -> str | None:
        entry = self._entries[path]
        if entry.mode in (GITLINK_MODE, LINK_MODE):
            return None  # a link's blob can equal a file's: never share a parse with it
        return entry.sha
