"""Which broker and config-sync ``phrame status``, ``promote`` and ``replay`` go to: an
explicit setting or option first, then a dev stack's ``stack.json``, then the defaults."""

from __future__ import annotations

from pathlib import Path

import pytest

from dev_stack.settings import DevSettings
from phrame.cli.dev_target import NoDevStack, config_sync, mqtt_env


@pytest.fixture
def stack(tmp_path: Path) -> DevSettings:
    s = DevSettings(tmp_path / "dev", broker_port=2999, listen="127.0.0.1:9181")
    s.state_dir.mkdir()
    s.save()
    s.credentials_dir.mkdir()
    (s.credentials_dir / "observer").write_text("pw\n")
    s.secret_file.write_text("hook-secret\n")
    return s


def test_status_reads_the_dev_stacks_broker_as_observer(stack: DevSettings) -> None:
    env = mqtt_env({"PHRAME_DEV_STATE_DIR": str(stack.state_dir), "PHRAME_NODE_TIMEOUT_S": "3"})
    assert env["PHRAME_DESIRED_MQTT_URL"] == "mqtt://127.0.0.1:2999"
    assert env["PHRAME_MQTT_USERNAME"] == "observer"
    assert env["PHRAME_MQTT_PASSWORD_FILE"] == str(stack.credentials_dir / "observer")
    assert env["PHRAME_NODE_TIMEOUT_S"] == "3"


@pytest.mark.parametrize(
    "given",
    [
        {"PHRAME_ACTUAL_MQTT_URL": "mqtts://prod:8883"},
        {"PHRAME_MQTT_USERNAME": "someone"},
        {"PHRAME_MQTT_PASSWORD_FILE": "/run/secrets/pw"},
    ],
)
def test_a_broker_or_login_setting_wins_over_the_dev_stack(stack: DevSettings, given: dict[str, str]) -> None:
    environ = {"PHRAME_DEV_STATE_DIR": str(stack.state_dir), **given}
    assert mqtt_env(environ) == environ


def test_no_dev_stack_changes_nothing_and_a_named_missing_one_is_an_error(
    tmp_path: Path, monkeypatch
) -> None:
    monkeypatch.chdir(tmp_path)  # no .phrame-dev here
    assert mqtt_env({"PATH": "/bin"}) == {"PATH": "/bin"}
    with pytest.raises(NoDevStack, match=f"PHRAME_DEV_STATE_DIR={tmp_path}: no dev stack there"):
        mqtt_env({"PHRAME_DEV_STATE_DIR": str(tmp_path)})


def test_config_sync_is_the_option_then_phrame_listen_then_the_dev_stack(stack: DevSettings) -> None:
    named = {"PHRAME_DEV_STATE_DIR": str(stack.state_dir)}
    assert config_sync(None, named) == ("http://127.0.0.1:9181", stack.secret_file)
    assert config_sync("http://127.0.0.1:9181/", named) == ("http://127.0.0.1:9181", stack.secret_file)
    # elsewhere: the dev stack's secret is never sent there
    assert config_sync("http://127.0.0.1:91810", named) == ("http://127.0.0.1:91810", None)
    assert config_sync(None, named | {"PHRAME_LISTEN": "10.0.0.5:8080"}) == ("http://10.0.0.5:8080", None)
