"""Credentials in PHRAME_REPO_URL: cut out of the URL, sent as HTTP Basic, redacted in text."""

from __future__ import annotations

import base64

import pytest

from config_sync.settings import SyncSettings
from phrame.settings.git_remote import GitRemote, redact, split_credentials
from placement.settings import PlacementSettings

TOKEN = "glpat-Phr4me-unit-token"


@pytest.mark.parametrize(
    ("url", "clean", "credentials"),
    [
        (f"http://oauth2:{TOKEN}@gitlab.test/g/x.git", "http://gitlab.test/g/x.git", f"oauth2:{TOKEN}"),
        ("https://u:p%40ss%3Aw@h.test:8443/x.git", "https://h.test:8443/x.git", "u:p@ss:w"),
        (f"HTTPS://{TOKEN}@h.test/x.git", "https://h.test/x.git", f"{TOKEN}:"),  # token as the user
        ("https://[::1]:8443/x.git", "https://[::1]:8443/x.git", None),
        ("https://h.test/x.git", "https://h.test/x.git", None),
        ("ssh://git@h.test/x.git", "ssh://git@h.test/x.git", None),  # the ssh user is kept
        ("ssh://git:secret@h.test/x.git", "ssh://git@h.test/x.git", None),  # git never uses it
        ("git@h.test:g/x.git", "git@h.test:g/x.git", None),
        ("/srv/git/phrame-config.git", "/srv/git/phrame-config.git", None),
        ("file:///srv/git/x.git", "file:///srv/git/x.git", None),
    ],
)
def test_split_credentials(url: str, clean: str, credentials: str | None) -> None:
    assert split_credentials(url) == (clean, credentials)


def test_url_credentials_go_to_git_as_basic_auth_and_win_over_the_token() -> None:
    remote = GitRemote.parse(f" https://oauth2:{TOKEN}@h.test/x.git ", token="api-token-0000", ca_file="/ca")
    assert remote.url == "https://h.test/x.git"
    env = remote.env()
    basic = base64.b64encode(f"oauth2:{TOKEN}".encode()).decode()
    assert env["GIT_CONFIG_KEY_0"] == "http.extraHeader"
    assert env["GIT_CONFIG_VALUE_0"] == f"Authorization: Basic {basic}"
    assert env["GIT_SSL_CAINFO"] == "/ca" and env["GIT_TERMINAL_PROMPT"] == "0"
    assert TOKEN not in repr(remote) and "api-token" not in repr(remote)


def test_without_url_credentials_the_token_is_sent_as_oauth2() -> None:
    env = GitRemote.parse("https://h.test/x.git", token=TOKEN).env()
    assert env["GIT_CONFIG_VALUE_0"].endswith(base64.b64encode(f"oauth2:{TOKEN}".encode()).decode())
    assert "GIT_CONFIG_COUNT" not in GitRemote.parse("/srv/x.git").env()


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        (
            f"cannot fetch http://oauth2:{TOKEN}@h.test/x.git into /s: fatal",
            "cannot fetch http://***@h.test/x.git into /s: fatal",
        ),
        (
            f"from 'https://{TOKEN}@a.test/x.git/' to https://u:p@ss@b.test:1/y",
            "from 'https://***@a.test/x.git/' to https://***@b.test:1/y",
        ),
        ("ssh://git:pw@h.test/x and ssh://git@h.test/y", "ssh://git:***@h.test/x and ssh://git@h.test/y"),
        ("mail ops@example.test about https://h.test/x", "mail ops@example.test about https://h.test/x"),
    ],
)
def test_redact_hides_user_info_in_every_url_of_a_message(text: str, shown: str) -> None:
    assert redact(text) == shown


def test_a_remote_redacts_its_own_secrets_also_outside_urls() -> None:
    remote = GitRemote.parse(f"https://oauth2:{TOKEN}@h.test/x.git", token="glpat-api-token-1234")
    text = f"echo {TOKEN} glpat-api-token-1234 {remote.env()['GIT_CONFIG_VALUE_0']}"
    shown = remote.redact(text)
    assert TOKEN not in shown and "api-token" not in shown and "Basic ***" in shown
    assert GitRemote.parse("https://git@h.test/x.git").redact("git fetch") == "git fetch"  # too short to mask


def test_settings_never_show_credentials_of_the_repo_url() -> None:
    env = {"PHRAME_REPO_URL": f"https://oauth2:{TOKEN}@h.test/x.git"}
    sync, placement = SyncSettings.from_env(env), PlacementSettings.from_env(env)
    assert sync.repo_url == placement.repo_url == env["PHRAME_REPO_URL"]  # the adapters split it
    assert TOKEN not in repr(sync) and TOKEN not in repr(placement)
