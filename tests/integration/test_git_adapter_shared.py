"""config-sync, placement and ``phrame plan`` read git through one adapter (phrame.git):
the same ref name means the same commit to each, the same merge base comes back from each
(None for unrelated histories), and a missing ref is the same shared error. Real git."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

import phrame.git
from config_sync.intake.clone import SyncRepo
from phrame.cli import cmd_plan
from placement.git_repo import PlacementRepo
from tests.support.services import require_binary


def git(cwd: Path, *args: str) -> str:
    out = subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True)
    return out.stdout.strip()


def commit(work: Path, name: str) -> str:
    (work / name).write_text(f"{name}\n")
    git(work, "add", name)
    git(work, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", name)
    return git(work, "rev-parse", "HEAD")


@pytest.fixture
def history(tmp_path: Path) -> dict[str, str]:
    """main: a - b - c; feature forks at b; v1 an annotated tag on a; `other` shares nothing."""
    require_binary("git", "git")
    work = tmp_path / "work"
    work.mkdir()
    git(work, "init", "-q", "-b", "main")
    shas = {"a": commit(work, "a"), "b": commit(work, "b")}
    git(work, "checkout", "-q", "-b", "feature")
    shas["feature"] = commit(work, "f")
    git(work, "checkout", "-q", "main")
    shas["c"] = commit(work, "c")
    git(work, "-c", "user.name=t", "-c", "user.email=t@t", "tag", "-a", "v1", "-m", "v1", shas["a"])
    git(work, "checkout", "-q", "--orphan", "other")
    shas["other"] = commit(work, "o")
    git(work, "checkout", "-q", "main")
    git(tmp_path, "clone", "-q", "--bare", str(work), "remote.git")
    shas["url"] = str(tmp_path / "remote.git")
    shas["work"] = str(work)
    return shas


def users(tmp_path: Path, url: str) -> tuple[SyncRepo, PlacementRepo]:
    sync = SyncRepo(url, tmp_path / "state")
    place = PlacementRepo(url, tmp_path / "state" / "placement" / "repo.git")
    sync.fetch()
    place.fetch()
    return sync, place


def test_one_ref_name_means_one_commit_to_every_user(tmp_path: Path, history: dict[str, str]) -> None:
    sync, place = users(tmp_path, history["url"])
    expected = {
        "main": history["c"],
        "refs/heads/main": history["c"],
        "feature": history["feature"],
        "refs/tags/v1": history["a"],  # the annotated tag peeled to its commit
        "v1": history["a"],  # a short name with no such branch is the tag
    }
    for ref, sha in expected.items():
        assert sync.head(ref) == place.head(ref) == sha, ref
        assert sync.is_tag(ref) == place.is_tag(ref) == ("v1" in ref), ref


def test_a_missing_ref_is_one_shared_error(tmp_path: Path, history: dict[str, str]) -> None:
    sync, place = users(tmp_path, history["url"])
    errors = []
    for user in (sync, place):
        with pytest.raises(phrame.git.RefMissing) as caught:  # config-sync keeps the last good state
            user.head("refs/tags/v9")
        errors.append(caught.value)
        with pytest.raises(phrame.git.RefMissing):  # a deleted branch, as placement tracks one
            user.head("gone")
    assert [str(e) for e in errors] == [f"tag 'v9' not found in {history['url']}"] * 2
    assert [type(e) for e in errors] == [phrame.git.RefMissing] * 2  # one class, no service's own


def test_one_merge_base_for_config_sync_placement_and_phrame_plan(
    tmp_path: Path, history: dict[str, str]
) -> None:
    sync, place = users(tmp_path, history["url"])
    main, feature, other = history["c"], history["feature"], history["other"]
    assert sync.merge_base(main, feature) == place.merge_base(main, feature) == history["b"]
    assert cmd_plan._merge_base(history["work"], "main", "feature") == history["b"]
    # unrelated histories: no base for anyone; `phrame plan` then plans from --from itself
    assert sync.merge_base(main, other) is None and place.merge_base(main, other) is None
    assert cmd_plan._merge_base(history["work"], "main", "other") == "main"
    assert cmd_plan._merge_base(str(tmp_path / "nowhere"), "main", "feature") == "main"
    assert place.is_ancestor(history["b"], main) and not place.is_ancestor(feature, main)
