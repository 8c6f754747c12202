"""The Host allow-list against DNS rebinding: names from PHRAME_LISTEN, localhost and
PHRAME_API_ALLOWED_HOSTS; an IP address names no DNS entry and is always accepted."""

from __future__ import annotations

import pytest

from topic_api.errors import SettingsError
from topic_api.guard import host_allowed, host_names
from topic_api.settings import ApiSettings

NAMES = host_names(listen_host="api.lan", extra=("Phrame.Example.",))


@pytest.mark.parametrize(
    "host",
    ["localhost", "localhost:8090", "LOCALHOST.", "api.lan:80", "phrame.example", "127.0.0.1:8090",
     "10.1.2.3", "[::1]:8090", "[fd00::5]", None],
)  # fmt: skip
def test_allowed(host: str | None) -> None:
    assert host_allowed(host, NAMES)


@pytest.mark.parametrize(
    "host",
    ["attacker.example", "attacker.example:8090", "localhost.attacker.example", "api.lan.evil",
     "", "a b", "localhost:x:y", "[::1", "127.0.0.1.nip.io"],
)  # fmt: skip
def test_refused(host: str) -> None:
    assert not host_allowed(host, NAMES)


def test_a_star_allows_every_host_and_the_setting_is_read(tmp_path: object) -> None:
    assert host_allowed("anything.example", host_names(listen_host="0.0.0.0", extra=("*",)))
    s = ApiSettings.from_env(
        {"PHRAME_MIRROR_DIR": "/x", "PHRAME_API_ALLOWED_HOSTS": " a.example , b.example "}
    )
    assert s.allowed_hosts == ("a.example", "b.example")
    assert host_allowed("b.example", s.host_names) and not host_allowed("c.example", s.host_names)
    with pytest.raises(SettingsError, match="PHRAME_API_ALLOWED_HOSTS"):
        ApiSettings.from_env({"PHRAME_MIRROR_DIR": "/x", "PHRAME_API_ALLOWED_HOSTS": "a/b"})
