"""The read cache keeps what is made of a whole environment in a bound of its own: a
long-running config-sync reading commit after commit keeps a few hundred of those, however
many per-file entries it holds, and neither kind pushes the other out."""

from __future__ import annotations

import shutil
from pathlib import Path

import git

from phrame.config_repo import ReadCache, load, validate
from phrame.config_repo.sources import GitSource

SAMPLE = Path(__file__).resolve().parents[2] / "fixtures" / "phrame-config"


def test_large_entries_have_their_own_bound() -> None:
    cache = ReadCache(max_entries=100, max_large=3)
    for i in range(50):
        cache.put(("file", i), i)
    for i in range(10):
        cache.put(("environment", i), [i] * 1000, large=True)
    assert len(cache) == 50 + 3
    assert [cache.get(("environment", i), large=True) is not None for i in range(10)] == [False] * 7 + [
        True
    ] * 3
    assert all(cache.get(("file", i)) == i for i in range(50))  # not pushed out by the large ones
    for i in range(200):
        cache.put(("file", 100 + i), i)
    assert cache.get(("environment", 9), large=True) is not None and len(cache) == 100 + 3


def test_reading_many_commits_keeps_environment_entries_bounded(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    shutil.copytree(SAMPLE, root)
    repo = git.Repo.init(root)
    service = root / "environments/studio-a/services/mixer.yaml"
    text = service.read_text()
    cache = ReadCache(max_large=8)
    for i in range(12):  # each commit a new studio-a: new environment entries every time
        service.write_text(text.replace("mixer:3.1.0", f"mixer:3.1.{i}"))
        repo.git.add(A=True)
        sha = repo.index.commit(f"commit {i}").hexsha
        loaded, read = load(GitSource(root, sha), cache=cache)
        assert validate(loaded, read, cache=cache) == []
    assert len(cache._large) == 8
