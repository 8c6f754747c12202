"""What config-sync and placement read from ``environment.yaml``: one reading for both."""

from __future__ import annotations

from pathlib import Path

from phrame.config_repo import load_directory


def env_with(tmp_path: Path, body: str):
    d = tmp_path / "environments" / "prod"
    d.mkdir(parents=True)
    (d / "environment.yaml").write_text("name: prod\n" + body)
    (tmp_path / "nodes").mkdir()
    repo, _problems = load_directory(tmp_path)
    return repo.environments["prod"]


def test_a_branch_is_one_branch_with_or_without_refs_heads(tmp_path: Path) -> None:
    assert env_with(tmp_path / "a", "track: refs/heads/release\n").track("main") == "release"
    assert env_with(tmp_path / "b", "track: release\n").track("main") == "release"
    assert env_with(tmp_path / "c", "track: refs/tags/v1\n").track("main") == "refs/tags/v1"


def test_defaults_are_the_default_ref_and_auto(tmp_path: Path) -> None:
    env = env_with(tmp_path, "")
    assert env.track("production") == "production" and env.placement_mode == "auto"
    review = env_with(tmp_path / "r", "placement: review\n")
    assert review.placement_mode == "review"
