"""One ``host:port`` parser and one settings error root for every part: config-sync's and the
topic API's ``PHRAME_LISTEN``, ``PHRAME_METRICS_LISTEN`` and ``phrame dev --listen`` accept
and refuse the same addresses, each naming its own setting. Pure: nothing binds."""

from __future__ import annotations

from pathlib import Path

import pytest

import config_sync.errors
import node_agent.errors
import phrame.mqtt
import placement.errors
import topic_api.errors
from config_sync.settings import SyncSettings
from dev_stack.errors import DevError
from dev_stack.settings import DevSettings
from phrame.settings import EnvReader, Listen, SettingsError, parse_host_port
from phrame.settings.metrics_listen import parse_listen
from topic_api.settings import ApiSettings

GOOD = {"127.0.0.1:8080": ("127.0.0.1", 8080), "[::1]:9310": ("::1", 9310), "0.0.0.0:1": ("0.0.0.0", 1)}
BAD = ("8080", "127.0.0.1:", ":8080", "host:0", "host:70000", "host:x", "[::1]")


@pytest.mark.parametrize(("text", "expected"), GOOD.items())
def test_every_listen_setting_reads_an_address_the_same_way(
    tmp_path: Path, text: str, expected: tuple[str, int]
) -> None:
    assert parse_host_port(text, name="X") == Listen(*expected)
    assert SyncSettings(repo_url="r", state_dir="s", listen=text).listen_address == expected
    assert ApiSettings(mirror_dir=tmp_path, listen=text).listen_address == expected
    assert DevSettings(tmp_path, listen=text).listen_address == expected
    assert parse_listen(text) == expected


@pytest.mark.parametrize("text", BAD)
def test_every_listen_setting_refuses_the_same_addresses_naming_itself(tmp_path: Path, text: str) -> None:
    with pytest.raises(config_sync.errors.SettingsError, match=r"PHRAME_LISTEN=.*expected host:port"):
        SyncSettings(repo_url="r", state_dir="s", listen=text)
    with pytest.raises(topic_api.errors.SettingsError, match=r"PHRAME_LISTEN=.*expected host:port"):
        ApiSettings(mirror_dir=tmp_path, listen=text)
    with pytest.raises(DevError, match=r"--listen=.*expected host:port"):
        DevSettings(tmp_path, listen=text)
    with pytest.raises(SettingsError, match=r"PHRAME_METRICS_LISTEN=.*expected host:port"):
        parse_listen(text)


def test_listen_prints_as_it_is_written() -> None:
    assert str(Listen("::1", 9310)) == "[::1]:9310" and str(Listen("127.0.0.1", 80)) == "127.0.0.1:80"


def test_one_settings_error_root_for_every_service() -> None:
    kinds = [
        (config_sync.errors.SettingsError, config_sync.errors.SyncError),
        (placement.errors.SettingsError, placement.errors.PlacementError),
        (node_agent.errors.SettingsError, node_agent.errors.AgentError),
        (topic_api.errors.SettingsError, topic_api.errors.TopicApiError),
        (phrame.mqtt.SettingsError, phrame.mqtt.MqttError),  # the mirror's too
    ]
    for kind, service_root in kinds:
        assert issubclass(kind, SettingsError) and issubclass(kind, service_root), kind
    with pytest.raises(SettingsError, match="N='x' is not a number"):
        EnvReader({"N": "x"}).number("N", 1)  # the reader's own default
