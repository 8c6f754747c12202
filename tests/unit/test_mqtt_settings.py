"""Broker URLs and ``PHRAME_*`` MQTT settings, parsed without any broker."""

from __future__ import annotations

from pathlib import Path

import pytest

from phrame.mqtt import MqttSettings, SettingsError
from phrame.mqtt.urls import parse_url


@pytest.mark.parametrize(
    ("url", "scheme", "host", "port", "path", "tls", "transport"),
    [
        ("mqtt://broker", "mqtt", "broker", 1883, "/mqtt", False, "tcp"),
        ("mqtts://broker.example:9883", "mqtts", "broker.example", 9883, "/mqtt", True, "tcp"),
        ("ws://127.0.0.1:9001", "ws", "127.0.0.1", 9001, "/mqtt", False, "websockets"),
        ("wss://b.example/ws/mqtt", "wss", "b.example", 443, "/ws/mqtt", True, "websockets"),
        ("WSS://[::1]:8443/", "wss", "::1", 8443, "/", True, "websockets"),
    ],
)
def test_parse_url(url: str, scheme: str, host: str, port: int, path: str, tls: bool, transport: str) -> None:
    b = parse_url(url)
    assert (b.scheme, b.host, b.port, b.path, b.is_tls, b.transport) == (
        scheme, host, port, path, tls, transport)  # fmt: skip


def test_url_credentials_are_decoded_and_never_shown() -> None:
    b = parse_url("mqtts://node-a:p%40ss@broker:8883")
    assert (b.username, b.password) == ("node-a", "p@ss")
    assert b.redacted() == "mqtts://broker:8883"


@pytest.mark.parametrize(
    "url",
    ["http://broker", "mqtt://", "mqtt://broker/path", "mqtt://broker:99999", "ws://b/x?y=1", "broker"],
)
def test_bad_urls_name_the_url(url: str) -> None:
    with pytest.raises(SettingsError, match="invalid broker URL"):
        parse_url(url)


def test_defaults_without_environment() -> None:
    s = MqttSettings.from_env("desired", env={})
    assert s.url == "mqtt://127.0.0.1:1883"
    assert (s.protocol, s.tls_verify_hostname, s.uses_oauth2) == ("5", True, False)
    assert s.mqtt_username is None and s.static_password is None


def test_one_url_serves_both_planes_and_each_plane_may_differ() -> None:
    one = {"PHRAME_ACTUAL_MQTT_URL": "wss://a.example/mqtt"}
    assert MqttSettings.from_env("desired", env=one).url == "wss://a.example/mqtt"
    both = {**one, "PHRAME_DESIRED_MQTT_URL": "mqtts://d.example"}
    assert MqttSettings.from_env("desired", env=both).url == "mqtts://d.example"
    assert MqttSettings.from_env("actual", env=both).url == "wss://a.example/mqtt"
    with pytest.raises(SettingsError, match="plane"):
        MqttSettings.from_env("sideways", env={})


def test_password_file_is_read_and_secrets_stay_out_of_repr(tmp_path: Path) -> None:
    secret = tmp_path / "pw"
    secret.write_text("s3cret\n")
    s = MqttSettings.from_env(
        env={"PHRAME_MQTT_USERNAME": "node-a", "PHRAME_MQTT_PASSWORD_FILE": str(secret)}
    )
    assert (s.mqtt_username, s.static_password) == ("node-a", "s3cret")
    assert "s3cret" not in repr(s)


def test_secret_and_its_file_together_are_refused(tmp_path: Path) -> None:
    env = {"PHRAME_MQTT_PASSWORD": "x", "PHRAME_MQTT_PASSWORD_FILE": str(tmp_path / "pw")}
    with pytest.raises(SettingsError, match="not both"):
        MqttSettings.from_env(env=env)
    with pytest.raises(SettingsError, match="cannot read"):
        MqttSettings.from_env(env={"PHRAME_MQTT_PASSWORD_FILE": str(tmp_path / "missing")})


def test_oauth2_settings_use_the_client_id_as_user_name() -> None:
    env = {
        "PHRAME_OAUTH2_TOKEN_URL": "https://idp.example/token",
        "PHRAME_OAUTH2_CLIENT_ID": "node-a",
        "PHRAME_OAUTH2_CLIENT_SECRET": "c",
    }
    s = MqttSettings.from_env(env=env)
    assert s.uses_oauth2 and s.mqtt_username == "node-a"
    assert MqttSettings.from_env(env={**env, "PHRAME_MQTT_USERNAME": "u"}).mqtt_username == "u"


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"PHRAME_OAUTH2_TOKEN_URL": "https://idp/token"}, "CLIENT_ID"),
        (
            {
                "PHRAME_OAUTH2_TOKEN_URL": "https://idp/token",
                "PHRAME_OAUTH2_CLIENT_ID": "a",
                "PHRAME_OAUTH2_CLIENT_SECRET": "b",
                "PHRAME_MQTT_PASSWORD": "c",
            },
            "not both",
        ),
        ({"PHRAME_TLS_CERT": "/c.pem"}, "together"),
        ({"PHRAME_MQTT_PROTOCOL": "4"}, "5, 3.1.1 or auto"),
        ({"PHRAME_TLS_VERIFY_HOSTNAME": "maybe"}, "true or false"),
        ({"PHRAME_MQTT_KEEPALIVE_S": "soon"}, "number"),
        ({"PHRAME_DESIRED_MQTT_URL": "tcp://b"}, "scheme"),
    ],
)
def test_contradictory_or_malformed_settings_fail_early(env: dict[str, str], message: str) -> None:
    with pytest.raises(SettingsError, match=message):
        MqttSettings.from_env(env=env)


def test_tuning_settings_are_read() -> None:
    s = MqttSettings.from_env(
        env={
            "PHRAME_MQTT_PROTOCOL": "3.1.1",
            "PHRAME_TLS_VERIFY_HOSTNAME": "false",
            "PHRAME_MQTT_KEEPALIVE_S": "15",
            "PHRAME_MQTT_SESSION_EXPIRY_S": "60",
            "PHRAME_MQTT_WILL_DELAY_S": "7",
            "PHRAME_MQTT_RECONNECT_MAX_S": "5",
            "PHRAME_OAUTH2_RETRY_MAX_S": "2.5",
            "PHRAME_MQTT_NO_CONNECTION_WARN_S": "0.5",
        }
    )
    assert (s.protocol, s.tls_verify_hostname, s.keepalive_s) == ("3.1.1", False, 15)
    assert (s.session_expiry_s, s.will_delay_s, s.reconnect_max_s) == (60, 7, 5)
    assert s.oauth2_retry_max_s == 2.5
    assert s.no_connection_warn_s == 0.5
    assert MqttSettings.from_env(env={}).no_connection_warn_s == 10.0  # the default stays 10 s


def test_the_client_id_is_the_user_name_when_there_is_one() -> None:
    """The generated broker replaces client ids by user names; services use them too."""
    assert MqttSettings(username="node-a", password="x").client_id("phrame-agent-a") == "node-a"
    assert MqttSettings(url="mqtt://node-b:pw@127.0.0.1:1883").client_id("fallback") == "node-b"
    assert MqttSettings().client_id("phrame-agent-a") == "phrame-agent-a"


def test_a_url_list_names_the_nodes_of_one_broker_in_order() -> None:
    s = MqttSettings(url="mqtt://n1:1883, mqtt://n2:1884,mqtt://n3")
    assert [(b.host, b.port) for b in s.brokers] == [("n1", 1883), ("n2", 1884), ("n3", 1883)]
    assert s.broker.host == "n1"  # the first is tried first
    assert MqttSettings(url="mqtts://u:p@a,mqtts://u:p@b").mqtt_username == "u"


@pytest.mark.parametrize(
    ("url", "match"),
    [
        ("mqtt://a,mqtts://b", "differ in scheme"),
        ("mqtt://u:p@a,mqtt://v:p@b", "different credentials"),
        ("mqtt://a,mqtt://a:1883", "listed twice"),
        ("mqtt://a,,mqtt://b", "an empty entry"),
        ("mqtt://a,http://b", "invalid broker URL"),
    ],
)
def test_a_bad_url_list_says_what(url: str, match: str) -> None:
    with pytest.raises(SettingsError, match=match):
        MqttSettings(url=url)


def test_an_empty_entry_never_shows_a_password() -> None:
    with pytest.raises(SettingsError) as caught:
        MqttSettings(url="mqtt://u:secret@a,,mqtt://u:secret@b")
    assert "secret" not in str(caught.value)


def test_auto_protocol_is_accepted_and_negotiates() -> None:
    assert MqttSettings(protocol="auto").negotiates
    assert not MqttSettings(protocol="3.1.1").negotiates
