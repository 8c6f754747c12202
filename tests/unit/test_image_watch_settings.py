"""``phrame image-watch``'s settings: what is required, what a bad value says, and the Docker
``config.json`` read into per-registry credentials (``auth`` or ``username``/``password``,
Docker Hub's ``https://index.docker.io/v1/`` key as ``docker.io``)."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest

from image_watch.registry import Credentials
from image_watch.settings import WatchSettings, WatchSettingsError
from phrame.settings import EnvReader


def _read(env: dict[str, str]) -> WatchSettings:
    return WatchSettings.from_env(EnvReader(env, error=WatchSettingsError))


def test_defaults_and_the_repository_required() -> None:
    s = _read({"PHRAME_REPO_URL": "/srv/git/phrame-config.git"})
    assert (s.git_host, s.track_ref, s.interval_s, s.platform) == ("local", "main", 300.0, ("linux", "amd64"))
    assert s.clone_cache.parts[-2:] == ("image-watch", "repo.git")
    with pytest.raises(WatchSettingsError, match="PHRAME_REPO_URL is required"):
        _read({})


@pytest.mark.parametrize(
    ("extra", "says"),
    [
        ({"PHRAME_GIT_HOST": "gitlab"}, "PHRAME_GIT_HOST=gitlab needs PHRAME_GITLAB_URL"),
        ({"PHRAME_TRACK_REF": "refs/tags/v1"}, "need a branch"),
        ({"PHRAME_IMAGE_PLATFORM": "arm64"}, "PHRAME_IMAGE_PLATFORM must be OS/ARCH"),
        ({"PHRAME_IMAGE_WATCH_INTERVAL_S": "1"}, "PHRAME_IMAGE_WATCH_INTERVAL_S"),
        ({"PHRAME_REGISTRY_AUTH_FILE": "/nonexistent/config.json"}, "PHRAME_REGISTRY_AUTH_FILE"),
    ],
)
def test_a_bad_setting_is_named(extra: dict[str, str], says: str) -> None:
    with pytest.raises(WatchSettingsError, match=says):
        _read({"PHRAME_REPO_URL": "/srv/git/x.git", **extra})


def test_registry_credentials_from_a_docker_config(tmp_path: Path) -> None:
    auth = tmp_path / "config.json"
    pair = base64.b64encode(b"bot:s3cret:with-colon").decode()
    auth.write_text(json.dumps({"auths": {
        "https://index.docker.io/v1/": {"auth": pair},
        "registry.studio.test": {"username": "ci", "password": "pw"},
    }}))  # fmt: skip
    s = _read({"PHRAME_REPO_URL": "/x.git", "PHRAME_REGISTRY_AUTH_FILE": str(auth),
               "PHRAME_REGISTRY_PLAIN_HTTP": "127.0.0.1:5000, reg.lan:5000"})  # fmt: skip
    assert s.credentials() == {
        "docker.io": Credentials("bot", "s3cret:with-colon"),
        "registry.studio.test": Credentials("ci", "pw"),
    }
    assert s.plain_http == {"127.0.0.1:5000", "reg.lan:5000"}
    assert "s3cret" not in repr(s.credentials()["docker.io"])  # a logged Credentials shows no password
