"""PHRAME_CONFIG_SYNC_URL and PHRAME_CONFIG_SYNC_TIMEOUT_S: read, and a URL that is none refused."""

from __future__ import annotations

import pytest

from topic_api.errors import SettingsError
from topic_api.settings import ApiSettings


def test_the_config_sync_url_and_timeout_are_read_and_a_bad_url_refused() -> None:
    base = {"PHRAME_MIRROR_DIR": "/x"}
    unset = ApiSettings.from_env(base)
    assert unset.config_sync_url is None and unset.config_sync_timeout_s == 60.0
    s = ApiSettings.from_env(
        base | {"PHRAME_CONFIG_SYNC_URL": "http://127.0.0.1:8080", "PHRAME_CONFIG_SYNC_TIMEOUT_S": "5"}
    )
    assert (s.config_sync_url, s.config_sync_timeout_s) == ("http://127.0.0.1:8080", 5.0)
    for bad in ("127.0.0.1:8080", "ftp://x", "http://"):
        with pytest.raises(SettingsError, match="PHRAME_CONFIG_SYNC_URL"):
            ApiSettings.from_env(base | {"PHRAME_CONFIG_SYNC_URL": bad})
    with pytest.raises(SettingsError, match="PHRAME_CONFIG_SYNC_TIMEOUT_S"):
        ApiSettings.from_env(base | {"PHRAME_CONFIG_SYNC_TIMEOUT_S": "0"})
