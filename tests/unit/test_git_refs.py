"""The one ref policy (phrame.git.refs): how config-sync and placement read a tracked ref
from the clone cache, and which refs may ever be written. Pure: no git."""

from __future__ import annotations

import pytest

import config_sync.errors
import phrame.git
import placement.errors
from phrame.git import refs
from placement.git_repo import branch_ref


@pytest.mark.parametrize(
    ("ref", "candidates"),
    [
        ("main", ["refs/remotes/origin/main", "refs/tags/main"]),
        ("refs/heads/main", ["refs/remotes/origin/main"]),
        ("refs/heads/feature/x", ["refs/remotes/origin/feature/x"]),
        ("refs/tags/v1", ["refs/tags/v1"]),
        ("merge-requests/7", ["refs/remotes/origin/merge-requests/7", "refs/tags/merge-requests/7"]),
    ],
)
def test_a_ref_is_read_from_the_same_cache_refs_by_every_user(ref: str, candidates: list[str]) -> None:
    assert refs.local_candidates(ref) == candidates


def test_branch_names_short_or_full_mean_one_branch() -> None:
    assert refs.remote_branch("main") == refs.remote_branch("refs/heads/main") == "refs/remotes/origin/main"
    assert refs.describe("refs/heads/main") == refs.describe("main") == "branch 'main'"
    assert refs.describe("refs/tags/v1") == "tag 'v1'"
    assert refs.is_tag_name("refs/tags/v1") and not refs.is_tag_name("main")


def test_only_branches_are_ever_written() -> None:
    assert refs.writable_ref("main") == "refs/heads/main"
    assert refs.writable_ref("refs/heads/review/x") == "refs/heads/review/x"
    with pytest.raises(phrame.git.TagTargetError, match="never writes to a tag"):
        refs.writable_ref("refs/tags/v1")
    with pytest.raises(phrame.git.GitError, match="only branches") as caught:
        refs.writable_ref("refs/merge-requests/1/head")
    assert not isinstance(caught.value, phrame.git.TagTargetError)


def test_placement_writes_through_the_same_policy() -> None:
    assert branch_ref("main") == "refs/heads/main"
    with pytest.raises(phrame.git.TagTargetError):
        branch_ref("refs/tags/v1")
    with pytest.raises(phrame.git.GitError):
        branch_ref("refs/notes/x")


def test_no_service_defines_its_own_git_error() -> None:
    # one GitError and one RefMissing (phrame.git) for config-sync and placement alike
    for module in (config_sync.errors, placement.errors):
        for name in ("GitError", "RefMissing", "PushRejected", "TagTargetError"):
            assert not hasattr(module, name), (module.__name__, name)
    assert phrame.git.GitError in placement.errors.EXPECTED


def test_a_git_killed_by_the_timeout_watchdog_is_a_timeout_whether_or_not_gitpython_said_so() -> None:
    """gitpython's watchdog kills git, then marks the kill; when the command's end is read
    in between (a busy machine), the error carries no timeout text, only SIGKILL's status.
    It was reported as 'cannot fetch ...' with git's empty stderr (seen in CI)."""
    import git

    from phrame.git.cache import timed_out

    said = git.GitCommandError(
        ["git", "fetch"], 1, stderr="Timeout: the command did not complete in 1.5 secs."
    )
    bare_kill = git.GitCommandError(["git", "fetch"], -9, stderr="")
    refused = git.GitCommandError(["git", "fetch"], 128, stderr="fatal: repository not found")
    assert timed_out(said) and timed_out(bare_kill) and not timed_out(refused)
