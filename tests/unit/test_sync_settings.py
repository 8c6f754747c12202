"""config_sync.settings: PHRAME_* variables into one SyncSettings, with clear errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from config_sync.errors import SettingsError
from config_sync.settings import SyncSettings


def test_defaults_and_overrides(tmp_path: Path) -> None:
    secret = tmp_path / "secret"
    secret.write_text("s3cret\n")
    s = SyncSettings.from_env(
        {
            "PHRAME_REPO_URL": "/srv/phrame-config.git",
            "PHRAME_STATE_DIR": str(tmp_path),
            "PHRAME_WEBHOOK_SECRET_FILE": str(secret),
            "PHRAME_DESIRED_MQTT_URL": "mqtt://127.0.0.1:1884",
        }
    )
    assert (s.git_host, s.listen_address, s.poll_s, s.deploy_timeout_s) == (
        "local",
        ("127.0.0.1", 8080),
        60,
        600,
    )
    assert s.webhook_secret == "s3cret" and "s3cret" not in repr(s)
    assert s.mqtt.url == "mqtt://127.0.0.1:1884" and s.topic_prefix == "phrame"
    s2 = SyncSettings.from_env(
        {"PHRAME_REPO_URL": "x", "PHRAME_POLL_S": "5", "PHRAME_LISTEN": "0.0.0.0:9000"}
    )
    assert s2.poll_s == 5 and s2.listen_address == ("0.0.0.0", 9000)
    assert s.git_timeout_s == 120
    assert SyncSettings.from_env({"PHRAME_REPO_URL": "x", "PHRAME_GIT_TIMEOUT_S": "7.5"}).git_timeout_s == 7.5
    assert (s.retry_min_s, s.retry_max_s) == (1, 60)
    s3 = SyncSettings.from_env(
        {"PHRAME_REPO_URL": "x", "PHRAME_RETRY_MIN_S": "2", "PHRAME_RETRY_MAX_S": "300"}
    )
    assert (s3.retry_min_s, s3.retry_max_s) == (2, 300)
    assert s3.preview_ports == (20000, 29999)
    s4 = SyncSettings.from_env({"PHRAME_REPO_URL": "x", "PHRAME_PREVIEW_PORTS": "47000-47009"})
    assert s4.preview_ports == (47000, 47009)


@pytest.mark.parametrize(
    ("env", "needle"),
    [
        ({}, "PHRAME_REPO_URL"),
        ({"PHRAME_REPO_URL": "x", "PHRAME_GIT_HOST": "github"}, "one of local, gitlab"),
        ({"PHRAME_REPO_URL": "x", "PHRAME_GIT_HOST": "gitlab"}, "PHRAME_GITLAB_URL, PHRAME_GITLAB_TOKEN"),
        ({"PHRAME_REPO_URL": "x", "PHRAME_POLL_S": "soon"}, "PHRAME_POLL_S"),
        ({"PHRAME_REPO_URL": "x", "PHRAME_POLL_S": "0"}, "at least 1"),
        ({"PHRAME_REPO_URL": "x", "PHRAME_LISTEN": "8080"}, "host:port"),
        ({"PHRAME_REPO_URL": "x", "PHRAME_PREVIEW_PORTS": "30000"}, "PHRAME_PREVIEW_PORTS.*FIRST-LAST"),
        ({"PHRAME_REPO_URL": "x", "PHRAME_PREVIEW_PORTS": "30000-20000"}, "PHRAME_PREVIEW_PORTS"),
        ({"PHRAME_REPO_URL": "x", "PHRAME_GIT_TIMEOUT_S": "0"}, "PHRAME_GIT_TIMEOUT_S.*at least 1"),
        (
            {"PHRAME_REPO_URL": "x", "PHRAME_WEBHOOK_SECRET": "a", "PHRAME_WEBHOOK_SECRET_FILE": "/f"},
            "not both",
        ),
        ({"PHRAME_REPO_URL": "x", "PHRAME_WEBHOOK_SECRET_FILE": "/nonexistent/f"}, "cannot read"),
    ],
)
def test_bad_settings_say_which(env: dict[str, str], needle: str) -> None:
    with pytest.raises(SettingsError, match=needle):
        SyncSettings.from_env(env)


def test_gitlab_host_with_everything_set() -> None:
    s = SyncSettings.from_env(
        {
            "PHRAME_REPO_URL": "https://gitlab.example.test/studio/phrame-config.git",
            "PHRAME_GIT_HOST": "gitlab",
            "PHRAME_GITLAB_URL": "https://gitlab.example.test",
            "PHRAME_GITLAB_TOKEN": "glpat-x",
            "PHRAME_GITLAB_PROJECT": "studio/phrame-config",
            "PHRAME_WEBHOOK_SECRET": "hook",
        }
    )
    assert s.git_host == "gitlab" and "glpat-x" not in repr(s)


@pytest.mark.parametrize(
    ("value", "branch"), [("refs/heads/main", "main"), ("release", "release"), ("refs/heads/", "main")]
)
def test_a_full_ref_name_tracks_the_branch(value: str, branch: str) -> None:
    """PHRAME_TRACK_REF=refs/heads/main names the branch main: git reads branch names, and a
    webhook's ref (refs/heads/main) is routed to the branch name."""
    assert SyncSettings.from_env({"PHRAME_REPO_URL": "x", "PHRAME_TRACK_REF": value}).default_ref == branch
    assert SyncSettings(repo_url="x", state_dir="/tmp", default_ref=value).default_ref == branch
