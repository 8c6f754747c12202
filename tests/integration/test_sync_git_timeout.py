"""A git host that accepts the connection and never answers: the fetch is stopped after
PHRAME_GIT_TIMEOUT_S with a clear, transient GitError instead of hanging a worker forever."""

from __future__ import annotations

import time
from pathlib import Path

from config_sync.intake.clone import SyncRepo
from phrame.git import GitError
from tests.support.sync_support import finishes_within, silent_git_server


def test_fetch_from_a_silent_host_times_out_with_a_clear_error(tmp_path: Path) -> None:
    with silent_git_server() as url:
        repo = SyncRepo(url, tmp_path / "state", timeout_s=1.5)
        started = time.monotonic()
        error = finishes_within(20, repo.fetch)
        took = time.monotonic() - started
    assert isinstance(error, GitError), error
    assert f"fetching {url} timed out after 1.5 s (PHRAME_GIT_TIMEOUT_S)" in str(error)
    assert 1.4 < took < 10
    assert repo.fetched_at is None  # never marked ready on a fetch that did not happen
