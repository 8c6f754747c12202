"""The mirror's settings: defaults, the folder under PHRAME_STATE_DIR, refusals that say what."""

from __future__ import annotations

from pathlib import Path

import pytest

from mirror.settings import MirrorSettings
from phrame.mqtt import SettingsError


def test_defaults_put_the_snapshot_under_the_state_dir() -> None:
    s = MirrorSettings.from_env("actual", {"PHRAME_STATE_DIR": "/srv/state"})
    assert (s.debounce_s, s.max_delay_s) == (0.25, 2.0)
    assert s.snapshot_path == Path("/srv/state/mirror/actual.json") and s.directory_is_default
    assert s.topic_filter == "phrame/actual/#"


def test_a_given_folder_prefix_and_windows() -> None:
    env = {
        "PHRAME_MIRROR_DIR": "/m",
        "PHRAME_TOPIC_PREFIX": "acme",
        "PHRAME_MIRROR_DEBOUNCE_MS": "100",
        "PHRAME_MIRROR_MAX_DELAY_MS": "900",
    }
    s = MirrorSettings.from_env("desired", env)
    assert (s.snapshot_path, s.topic_filter, s.debounce_s, s.max_delay_s) == (
        Path("/m/desired.json"),
        "acme/desired/#",
        0.1,
        0.9,
    )
    assert not s.directory_is_default


@pytest.mark.parametrize(
    ("env", "plane", "says"),
    [
        ({}, "both", "unknown plane 'both'"),
        ({"PHRAME_MIRROR_DEBOUNCE_MS": "0"}, "actual", "PHRAME_MIRROR_DEBOUNCE_MS"),
        ({"PHRAME_MIRROR_DEBOUNCE_MS": "soon"}, "actual", "PHRAME_MIRROR_DEBOUNCE_MS"),
        ({"PHRAME_MIRROR_MAX_DELAY_MS": "100"}, "actual", "must be at least PHRAME_MIRROR_DEBOUNCE_MS (250)"),
    ],
)
def test_bad_settings_are_refused_by_name(env: dict, plane: str, says: str) -> None:
    with pytest.raises(SettingsError, match=says.replace("(", r"\(").replace(")", r"\)")):
        MirrorSettings.from_env(plane, env)


def test_the_heartbeat_delay_defaults_to_10_s_and_is_never_under_the_debounce() -> None:
    assert MirrorSettings.from_env("actual", {"PHRAME_STATE_DIR": "/s"}).heartbeat_delay_s == 10.0
    env = {"PHRAME_STATE_DIR": "/s", "PHRAME_MIRROR_HEARTBEAT_DELAY_MS": "5000"}
    assert MirrorSettings.from_env("actual", env).heartbeat_delay_s == 5.0
    with pytest.raises(SettingsError, match=r"PHRAME_MIRROR_HEARTBEAT_DELAY_MS \(100\) must be at least"):
        MirrorSettings.from_env("actual", env | {"PHRAME_MIRROR_HEARTBEAT_DELAY_MS": "100"})
