"""Placement's fetch and push against a git host that accepts and never answers: both are
stopped after PHRAME_GIT_TIMEOUT_S with a GitError (transient: the next pass retries)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from phrame.git import GitError
from placement.git_repo import PlacementRepo
from tests.integration.test_placement_git import ConfigRemote
from tests.support.sync_support import finishes_within, silent_git_server


@pytest.mark.slow
def test_fetch_and_push_to_a_silent_host_time_out(tmp_path: Path) -> None:
    remote = ConfigRemote(tmp_path)
    cache = tmp_path / "cache.git"
    PlacementRepo(str(remote.bare), cache).fetch()  # a cache holding main, so there is a commit to push
    head = remote.head("main")
    with silent_git_server() as url:
        repo = PlacementRepo(url, cache, timeout_s=1.5)
        for what, work in (("fetch", repo.fetch), ("push", lambda: repo.push(head, "main"))):
            started = time.monotonic()
            error = finishes_within(20, work)
            took = time.monotonic() - started
            assert isinstance(error, GitError), (what, error)
            assert "timed out after 1.5 s (PHRAME_GIT_TIMEOUT_S)" in str(error), (what, error)
            assert 1.4 < took < 10, (what, took)
    assert remote.head("main") == head
