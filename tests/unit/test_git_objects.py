"""The clone cache reads refs and commits through one long-lived ``git cat-file``: the same
listing, sizes, content ids and errors as ``GitSource``, fresh after every fetch, and no git
process started for a sync besides its fetch."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import git
import pytest

from phrame.config_repo.sources import GitSource, NotAFile
from phrame.git.cache import GitCache
from phrame.git.objects import CommitSource, ObjectReader
from tests.support.sync_support import ConfigRemote

FETCH_FAMILY = (
    "fetch",
    "upload-pack",
    "pack-objects",
    "unpack-objects",
    "index-pack",
    "rev-list",
)


def _odd_repo(root: Path) -> tuple[git.Repo, str]:
    """A commit with nested folders, an empty file, an executable, one blob at two paths, a
    symlink, a gitlink (submodule) and a file name that is not UTF-8."""
    repo = git.Repo.init(root)
    files = {
        "nodes/n1.yaml": b"name: n1\n",
        "nodes/n2.yaml": b"name: n1\n",  # the same blob as n1
        "environments/lab/environment.yaml": b"name: lab\n" * 30,
        "environments/lab/services/deep/x.yaml": b"",
        "bin/run.sh": b"#!/bin/sh\n",
        "README.md": b"# config\n",
    }
    for name, data in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes(data)
    os.chmod(root / "bin/run.sh", 0o755)
    os.symlink("../nodes/n1.yaml", root / "environments/lab/link.yaml")
    odd = os.fsencode(root / "environments/lab/services") + b"/caf\xe9.yaml"
    with open(odd, "wb") as f:
        f.write(b"name: cafe\n")
    repo.git.add(A=True)
    sub = "1" * 40
    repo.git.update_index("--add", "--cacheinfo", f"160000,{sub},vendor/sub")
    repo.git.commit("-m", "odd", env={"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t",
                                      "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"})  # fmt: skip
    return repo, repo.head.commit.hexsha


def _seen(source: GitSource | CommitSource) -> dict[str, tuple[int, str | None, object]]:
    out: dict[str, tuple[int, str | None, object]] = {}
    for path, size in source.files():
        try:
            read: object = source.read(path)
        except NotAFile as e:
            read = ("not a file", e.what)
        out[path] = (size, source.content_id(path), read)
    return out


def test_a_commit_reads_as_git_source_reads_it(tmp_path: Path) -> None:
    repo, sha = _odd_repo(tmp_path / "r")
    objects = ObjectReader(Path(repo.git_dir))
    try:
        ours = _seen(CommitSource(objects, sha))
        theirs = _seen(GitSource(tmp_path / "r", sha))
        assert list(ours) == list(theirs)  # sorted alike, the non-UTF-8 name escaped alike
        assert ours == theirs
        assert ours["vendor/sub"] == (0, None, ("not a file", "a git submodule"))
        assert ours["environments/lab/link.yaml"][2] == ("not a file", "a symbolic link to ../nodes/n1.yaml")
        # a second listing of the same commit asks git for nothing but the commit
        assert _seen(CommitSource(objects, sha)) == ours and objects.started == 1
    finally:
        objects.close()


def test_refs_resolve_fresh_after_each_fetch_and_one_process_serves_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    remote = ConfigRemote(tmp_path)
    first = remote.commit("one", files={"nodes/a.yaml": "name: a\n", "nodes/b.yaml": "name: b\n"})
    remote.work.git.tag("-a", "v1", "-m", "release one")
    remote.work.git.push("origin", "v1")
    remote.commit("gone soon", branch="feature")
    cache = GitCache(str(remote.bare_path), tmp_path / "state" / "cache.git")
    try:
        first_trace = tmp_path / "first.trace"
        monkeypatch.setenv("GIT_TRACE", str(first_trace))
        cache.fetch()  # the first fetch lets git check whether to pack what fetches leave loose
        monkeypatch.delenv("GIT_TRACE")
        assert "built-in: git maintenance run --auto" in first_trace.read_text()
        assert cache.head("main") == first and cache.head("refs/tags/v1") == first  # the tag peeled
        assert cache.has_branch("feature") and cache.resolve("no-such-ref") is None
        assert cache.resolve("main\ninfo HEAD") is None  # one request per line: never two
        repo, _ = cache.load(first)
        assert sorted(repo.nodes) == ["a", "b"]

        # a new commit changing one file, a branch deleted: what git runs for the next sync
        second = remote.commit("two", files={"nodes/b.yaml": "name: b\nlabels: {x: y}\n"})
        remote.work.git.push("origin", "--delete", "feature")
        trace = tmp_path / "git.trace"
        monkeypatch.setenv("GIT_TRACE", str(trace))  # real git reports every command it runs
        cache.fetch()
        head = cache.head("main")
        repo, _ = cache.load(head)
        commands = [
            line.split("trace: built-in: git ", 1)[1].split()[0]
            for line in trace.read_text().splitlines()
            if "trace: built-in: git " in line
        ]
        assert head == second and repo.nodes["b"].data == {"name": "b", "labels": {"x": "y"}}
        assert not cache.has_branch("feature")  # pruned, and seen so by the long-lived reader
        assert commands and set(commands) <= set(FETCH_FAMILY), commands  # not even maintenance
        assert cache.objects.started == 1
    finally:
        cache.objects.close()


def test_a_reader_that_died_is_started_again(tmp_path: Path) -> None:
    remote = ConfigRemote(tmp_path)
    sha = remote.commit("one", files={"nodes/a.yaml": "name: a\n"})
    objects = ObjectReader(remote.bare_path)
    try:
        assert objects.commit_of("main") == sha
        assert objects._proc is not None
        os.kill(objects._proc.pid, signal.SIGKILL)
        objects._proc.wait()
        assert objects.commit_of("main") == sha and objects.started == 2
    finally:
        objects.close()
