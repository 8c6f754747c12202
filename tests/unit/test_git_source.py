"""GitSource lists a commit in one git call: sizes, blobs and modes without asking git
for each file (config-sync lists 2,000 files on every sync, incremental ones included)."""

from __future__ import annotations

import os
from pathlib import Path

import git
import pytest

from phrame.config_repo.sources import GitSource, NotAFile


def _repo(tmp_path: Path) -> git.Repo:
    repo = git.Repo.init(tmp_path)
    files = {
        "nodes/n1.yaml": "name: n1\n",
        "environments/lab/environment.yaml": "name: lab\n" * 30,
        "README.md": "",
    }
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    os.symlink("../nodes/n1.yaml", tmp_path / "environments/lab/link.yaml")
    repo.index.add([*files, "environments/lab/link.yaml"])
    repo.index.commit("c", author=git.Actor("t", "t@t"), committer=git.Actor("t", "t@t"))
    return repo


def test_sizes_blobs_and_links_from_one_listing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    repo = _repo(tmp_path)
    trace = tmp_path / "git.trace"
    monkeypatch.setenv("GIT_TRACE", str(trace))  # real git reports every command it runs
    source = GitSource(tmp_path, "HEAD")
    files = dict(source.files())
    commands = [
        line.split("trace: built-in: ", 1)[1]
        for line in trace.read_text().splitlines()
        if "built-in: " in line
    ]
    listings = [c for c in commands if c.startswith("git ls-tree")]
    # one listing of the whole commit with sizes: a tree walk would list no tree at all
    assert len(listings) == 1 and "-r -l" in listings[0], commands
    assert files == {
        "README.md": 0,
        "environments/lab/environment.yaml": 300,
        "environments/lab/link.yaml": len("../nodes/n1.yaml"),
        "nodes/n1.yaml": 9,
    }
    assert source.content_id("nodes/n1.yaml") == repo.git.rev_parse("HEAD:nodes/n1.yaml")
    assert source.content_id("environments/lab/link.yaml") is None
    assert source.read("nodes/n1.yaml") == b"name: n1\n" and source.has_layout()
    with pytest.raises(NotAFile, match=r"symbolic link to \.\./nodes/n1\.yaml"):
        source.read("environments/lab/link.yaml")
