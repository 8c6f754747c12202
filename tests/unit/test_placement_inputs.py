"""From the config repo to the decision's inputs (phrame.placement_rules.inventory), the settings, the
commit message, and the sample repo's own node.json being a fixed point of the decision."""

from __future__ import annotations

from pathlib import Path

import pytest

from phrame.config_repo import ConfigRepo, load_directory, validate
from phrame.placement_rules import inventory
from phrame.placement_rules.decide import decide
from phrame.placement_rules.models import Decision, Move, NodeHealth
from placement.errors import SettingsError
from placement.reconcile import render_document
from placement.settings import PlacementSettings

FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "phrame-config"
GI = 2**30


def sample() -> ConfigRepo:
    repo, problems = load_directory(FIXTURE)
    assert validate(repo, problems) == []
    return repo


def test_nodes_and_services_of_the_sample_repo() -> None:
    repo = sample()
    nodes = inventory.nodes_of(repo)
    assert sorted(nodes) == ["core-01", "edge-01", "edge-02", "edge-03"]
    assert nodes["edge-02"].labels["gpu"] == "true" and nodes["edge-02"].cpus == 8
    assert nodes["edge-02"].memory == 16 * GI and not nodes["edge-02"].cordoned
    services = {s.name: s for s in inventory.services_of(repo.environments["studio-a"])}
    mixer = services["mixer"]
    assert mixer.is_label_placed and mixer.spread and mixer.replicas == 2
    assert mixer.labels == {"role": "edge"} and mixer.cpus == 3 and mixer.memory == 6 * GI
    assert services["tams"].pin == "core-01" and not services["tams"].is_label_placed
    assert services["ptp-monitor"].pin == "edge-01"  # a process service reserves capacity too
    assert inventory.mode_and_track(repo.environments["studio-a"], "production") == ("auto", "main")


def test_sample_node_json_is_a_fixed_point() -> None:
    repo = sample()
    env = repo.environments["studio-a"]
    nodes = inventory.nodes_of(repo)
    current = inventory.current_document(env)
    d = decide(
        "studio-a",
        nodes=nodes,
        services=inventory.services_of(env),
        current=current,
        health=dict.fromkeys(nodes, NodeHealth(alive=True)),
        now=0.0,
        reschedule_after=60,
        reserved=inventory.reserved_elsewhere(repo, "studio-a"),
    )
    assert not d.is_changed and d.moves == () and d.doc == current
    text = render_document(d.doc).decode()
    assert text.endswith("}\n") and text.index('"assignments"') < text.index('"schema"')  # sorted keys


def test_an_environment_without_track_follows_the_default_ref() -> None:
    repo = sample()
    env = repo.environments["studio-a"]
    assert env.doc is not None
    env.doc.data.pop("track")
    assert inventory.mode_and_track(env, "production") == ("auto", "production")
    assert inventory.mode_and_track(env, "refs/heads/production") == ("auto", "production")


def test_default_ref_is_phrame_track_ref_as_for_config_sync() -> None:
    assert PlacementSettings.from_env({"PHRAME_REPO_URL": "x"}).default_ref == "main"
    s = PlacementSettings.from_env({"PHRAME_REPO_URL": "x", "PHRAME_TRACK_REF": "production"})
    assert s.default_ref == "production"
    full = PlacementSettings.from_env({"PHRAME_REPO_URL": "x", "PHRAME_TRACK_REF": "refs/heads/production"})
    assert full.default_ref == "production"  # one branch, as Environment.track() reads it
    tag = PlacementSettings.from_env({"PHRAME_REPO_URL": "x", "PHRAME_TRACK_REF": "refs/tags/v1"})
    assert tag.default_ref == "refs/tags/v1"
    old = PlacementSettings.from_env({"PHRAME_REPO_URL": "x", "PHRAME_DEFAULT_BRANCH": "other"})
    assert old.default_ref == "main"  # the old name is gone: one setting for both services


def test_reserved_elsewhere_counts_only_other_environments() -> None:
    assert inventory.reserved_elsewhere(sample(), "studio-a") == {}


def test_commit_message_says_what_moved_and_why() -> None:
    one = Decision({}, (Move("mixer", 1, "edge-02", "edge-03", "edge-02 offline for 75 s"),), is_changed=True)
    assert one.commit_message("studio-a") == (
        "placement studio-a: edge-02 offline for 75 s: mixer.1 edge-02 → edge-03\n\n"
        "edge-02 offline for 75 s: mixer.1 edge-02 → edge-03\n"
    )
    gone = Move("a", 2, "n1", None, "scaled down to 2", is_removal=True)
    assert gone.describe() == "scaled down to 2: a.2 n1 → (removed)"


def test_settings_defaults_and_validation(tmp_path: Path) -> None:
    s = PlacementSettings.from_env({"PHRAME_REPO_URL": "/srv/config.git"})
    assert (s.node_timeout_s, s.reschedule_after_s, s.node_gc_s) == (20.0, 60.0, 86400.0)
    assert s.git_host == "local" and s.lock_file is None and s.topic_prefix == "phrame"
    assert s.git_token is None and s.git_timeout_s == 120.0
    timed = PlacementSettings.from_env({"PHRAME_REPO_URL": "x", "PHRAME_GIT_TIMEOUT_S": "30"})
    assert timed.git_timeout_s == 30.0
    with pytest.raises(SettingsError, match="PHRAME_GIT_TIMEOUT_S"):
        PlacementSettings.from_env({"PHRAME_REPO_URL": "x", "PHRAME_GIT_TIMEOUT_S": "0.5"})
    with pytest.raises(SettingsError, match="PHRAME_REPO_URL"):
        PlacementSettings.from_env({})
    with pytest.raises(SettingsError, match=r"PHRAME_GIT_HOST=.github. must be one of local, gitlab"):
        PlacementSettings.from_env({"PHRAME_REPO_URL": "x", "PHRAME_GIT_HOST": "github"})
    with pytest.raises(SettingsError, match="not a number"):
        PlacementSettings.from_env({"PHRAME_REPO_URL": "x", "PHRAME_NODE_TIMEOUT_S": "soon"})
    token = tmp_path / "token"
    token.write_text("glpat-secret\n")
    g = PlacementSettings.from_env(
        {
            "PHRAME_REPO_URL": "https://gitlab.example.test/g/config.git",
            "PHRAME_GIT_HOST": "gitlab",
            "PHRAME_GITLAB_URL": "https://gitlab.example.test",
            "PHRAME_GITLAB_PROJECT": "g/config",
            "PHRAME_GITLAB_TOKEN_FILE": str(token),
            "PHRAME_LOCK_FILE": "/run/phrame/placement.lock",
        }
    )
    assert g.git_token == "glpat-secret"  # given to git through its environment, never in the URL
    assert "glpat-secret" not in repr(g) and g.lock_file == Path("/run/phrame/placement.lock")
    with pytest.raises(SettingsError, match="PHRAME_GITLAB_URL"):
        PlacementSettings.from_env({"PHRAME_REPO_URL": "x", "PHRAME_GIT_HOST": "gitlab"})
