"""The one ref policy (phrame.git.refs): how config-sync and placement read a tracked ref
from the clone cache, and which refs may ever be written. Pure: no git."""

from __future__ import annotations

import pytest

import config_sync.errors
import phrame.git
import placement.errors
from config_sync.intake.clone import RefMissing as SyncRefMissing
from phrame.git import refs
from phrame.git.errors import ErrorKinds
from placement.git_repo import ERRORS as PLACEMENT_ERRORS


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


def test_the_policy_raises_the_callers_own_errors() -> None:
    with pytest.raises(placement.errors.TagTargetError) as caught:
        refs.writable_ref("refs/tags/v1", PLACEMENT_ERRORS)
    assert isinstance(caught.value, placement.errors.PlacementError)
    assert isinstance(caught.value, phrame.git.TagTargetError)  # one hierarchy for every user
    with pytest.raises(placement.errors.GitError):
        refs.writable_ref("refs/notes/x", PLACEMENT_ERRORS)


def test_every_service_error_is_also_the_shared_one() -> None:
    pairs = [
        (config_sync.errors.GitError, phrame.git.GitError),
        (SyncRefMissing, phrame.git.RefMissing),
        (placement.errors.GitError, phrame.git.GitError),
        (placement.errors.PushRejected, phrame.git.PushRejected),
        (placement.errors.TagTargetError, phrame.git.TagTargetError),
    ]
    for service, shared in pairs:
        assert issubclass(service, shared), (service, shared)
    assert issubclass(SyncRefMissing, config_sync.errors.SyncError)
    assert ErrorKinds().tag_target is phrame.git.TagTargetError
