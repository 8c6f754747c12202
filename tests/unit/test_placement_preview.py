"""The placement preview of a review (phrame.placement_rules.preview): what placement would do now
with the proposed tree, for the replicas the change adds or moves, and nothing else."""

from __future__ import annotations

import shutil
from pathlib import Path

from phrame.config_repo import ConfigRepo, load_directory, validate
from phrame.placement_rules.preview import Placed, preview

FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "phrame-config"
MIXER = "environments/studio-a/services/mixer.yaml"


def proposed(tmp_path: Path, rel: str, old: str, new: str) -> ConfigRepo:
    root = tmp_path / "repo"
    shutil.copytree(FIXTURE, root)
    path = root / rel
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new))
    repo, problems = load_directory(root)
    assert validate(repo, problems) == []
    return repo


def test_the_sample_as_it_is_previews_nothing() -> None:
    repo, problems = load_directory(FIXTURE)
    assert validate(repo, problems) == []
    assert preview(repo) == []


def test_a_third_replica_shows_the_node_placement_would_choose(tmp_path: Path) -> None:
    repo = proposed(tmp_path, MIXER, "replicas: 2", "replicas: 3")
    (placed,) = preview(repo)
    # spread over role=edge: edge-02 and edge-03 hold the first two, so only edge-01 is left
    assert placed == Placed("studio-a", "mixer.2", None, "edge-01", "new replica")


def test_an_offline_node_is_not_chosen_and_the_reason_is_given(tmp_path: Path) -> None:
    repo = proposed(tmp_path, MIXER, "replicas: 2", "replicas: 3")
    (placed,) = preview(repo, offline={"edge-01"})
    assert (placed.replica, placed.target) == ("mixer.2", None)
    assert "edge-01" in placed.cause


def test_an_offline_node_keeps_its_replicas_in_a_preview(tmp_path: Path) -> None:
    """Moving replicas off an offline node is placement's grace period, not the change's doing."""
    repo = proposed(tmp_path, MIXER, "replicas: 2", "replicas: 2")
    assert preview(repo, offline={"edge-02", "edge-03"}) == []


def test_a_selector_change_moves_the_replicas_that_no_longer_match(tmp_path: Path) -> None:
    repo = proposed(tmp_path, MIXER, "role: edge", "role: core")
    moved = preview(repo)
    assert {p.replica for p in moved} == {"mixer.0", "mixer.1"}
    assert all(p.source in ("edge-02", "edge-03") and "no longer matches" in p.cause for p in moved)
