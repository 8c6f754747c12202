"""Readings of a config repository's commits, through a read cache and without one."""

from __future__ import annotations

from pathlib import Path

import git

from phrame.config_repo import ConfigRepo, Problem, ReadCache, load
from phrame.config_repo.sources import GitSource

Loaded = tuple[ConfigRepo, list[Problem]]


def commit_and_read(repo: git.Repo, message: str, cache: ReadCache) -> tuple[str, Loaded, Loaded]:
    """Commit ``repo``'s work tree as it is, then load the commit twice: through ``cache``
    (as config-sync reads one commit after another) and fresh (no cache)."""
    repo.git.add(A=True)
    sha = repo.index.commit(message).hexsha
    root = Path(str(repo.working_tree_dir))
    return sha, load(GitSource(root, sha), cache=cache), load(GitSource(root, sha))
