"""PHRAME_REPO_URL as operators write it: with a token inside, and changed after a first start.

A token pasted into the URL must reach the server (real ``git http-backend`` behind TLS,
tests/support/git_http.py) but nothing else: not /status, not a log line, not a byte of
the state directory, not a command line. A changed URL must be followed by the cached
clone: after a restart on another repository, config-sync publishes that repository's head
(real mosquitto) and placement reads and writes that repository.
"""

from __future__ import annotations

import base64
import json
import logging
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path

import git
import httpx
import pytest

from config_sync.intake.clone import SyncRepo
from config_sync.reporting import LocalReporter
from config_sync.service import ConfigSync
from config_sync.settings import SyncSettings
from phrame.git import GitError
from phrame.mqtt import MqttSettings
from placement.git_repo import PlacementRepo
from placement.loop import build_loop
from placement.settings import PlacementSettings
from schemas import Topics
from tests.integration.test_sync_app import serving
from tests.support.certs import Pki, make_pki
from tests.support.git_http import GitHttpServer
from tests.support.mosquitto import Mosquitto
from tests.support.services import require_binary, wait_until
from tests.support.sync_support import SAMPLE, SECRET, ConfigRemote, reader, running_sync

pytestmark = pytest.mark.slow

TOKEN = "glpat-Phr4me-url-token-0001"
WRONG = "glpat-Phr4me-wrong-url-0002"
REPO = "phrame-config.git"
NODE_JSON = "environments/studio-a/node.json"
SYNC = Topics().env_sync("studio-a")


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(("127.0.0.1",), directory=tmp_path_factory.mktemp("pki"))


@pytest.fixture
def remote(tmp_path: Path) -> ConfigRemote:
    return ConfigRemote.with_sample(tmp_path / "srv", "initial config", http_push=True)


@pytest.fixture
def server(remote: ConfigRemote, pki: Pki) -> Iterator[GitHttpServer]:
    require_binary("git", "git")
    with GitHttpServer(remote.bare_path.parent, token=TOKEN, cert=pki.server_cert, key=pki.server_key) as srv:
        yield srv


def with_token(url: str, token: str) -> str:
    return url.replace("https://", f"https://oauth2:{token}@")


def bare_head(remote: ConfigRemote, ref: str = "main") -> str:
    return str(remote.work.git.execute(["git", "--git-dir", str(remote.bare_path), "rev-parse", ref]))


def assert_nowhere(token: str, *, texts: dict[str, str], state: Path) -> None:
    """``token`` (as is, URL-quoted or inside HTTP Basic) is in no text and no file under ``state``."""
    needles = [token, base64.b64encode(f"oauth2:{token}".encode()).decode()]
    for name, text in texts.items():
        for needle in needles:
            assert needle not in text, f"the token is in {name}"
    files = [p for p in state.rglob("*") if p.is_file()]
    assert files, f"nothing under {state}"
    for path in files:
        data = path.read_bytes()
        assert not any(n.encode() in data for n in needles), f"the token is in {path}"


@contextmanager
def served(settings: SyncSettings) -> Iterator[tuple[ConfigSync, str]]:
    """config-sync started and stopped by its app, on uvicorn at 127.0.0.1."""
    service = ConfigSync(settings, reporter=LocalReporter())
    with serving(service) as url:
        yield service, url


def published_commit(broker_url: str) -> str | None:
    """The commit studio-a's sync topic says was applied, if any."""
    with reader(broker_url) as client:
        sync = json.loads(client.collect_retained(SYNC, settle=0.2).get(SYNC, b"{}"))
    commit = sync.get("last_applied", {}).get("commit")
    return str(commit) if commit else None


def status_of(url: str) -> str:
    # the webhook secret, in case /status is behind it
    return httpx.get(f"{url}/status", headers={"X-Gitlab-Token": SECRET}, timeout=10).text


def test_config_sync_keeps_a_token_in_the_url_out_of_status_logs_state_and_argv(
    tmp_path: Path,
    remote: ConfigRemote,
    server: GitHttpServer,
    pki: Pki,
    mosquitto: Mosquitto,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    state = tmp_path / "state"
    refused = SyncSettings(
        repo_url=with_token(server.url(REPO), WRONG),
        state_dir=str(state),
        git_ca_file=str(pki.ca),
        webhook_secret=SECRET,
        poll_s=3600,
        debounce_s=0,
        mqtt=MqttSettings(url=mosquitto.url),
    )
    with served(refused) as (service, url):
        wait_until(
            lambda: getattr(service.queue.workers.get("ref:main"), "failures", 0), "the refused fetch", 30
        )
        failed = status_of(url)
    assert "refused the credentials" in failed and server.url(REPO) in failed  # said, and where
    assert_nowhere(WRONG, texts={"/status": failed, "the logs": caplog.text}, state=state)

    with served(replace(refused, repo_url=with_token(server.url(REPO), TOKEN))) as (service, url):
        wait_until(lambda: published_commit(mosquitto.url) == bare_head(remote), "the head published", 30)
        ok = status_of(url)
    assert json.loads(ok)["workers"]["ref:main"]["failures"] == 0
    assert (state / "config-sync" / "config-repo.git" / "config").read_text().count(server.url(REPO)) == 1
    assert all(r.is_authorized for r in server.seen()[-2:])  # the token reached the server
    assert server.argv_scans >= len(server.seen()) and server.argv_leaks == []
    assert_nowhere(TOKEN, texts={"/status": ok, "the logs": caplog.text}, state=state)


def test_placement_keeps_a_token_in_the_url_out_of_errors_logs_state_and_argv(
    tmp_path: Path, remote: ConfigRemote, server: GitHttpServer, pki: Pki, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    state = tmp_path / "state"
    env = {
        "PHRAME_REPO_URL": with_token(server.url(REPO), TOKEN),
        "PHRAME_GIT_CA_FILE": str(pki.ca),
        "PHRAME_STATE_DIR": str(state),
    }
    git = build_loop(PlacementSettings.from_env(env)).reconciler.git  # its MQTT clients never start
    git.fetch()
    parent = git.head("main")
    assert parent == bare_head(remote)
    sha = git.commit_file(parent, NODE_JSON, b'{"assignments": {}}\n', "placement studio-a: test")
    git.push(sha, "main")
    assert bare_head(remote) == sha
    assert server.argv_scans >= len(server.seen()) and server.argv_leaks == []

    wrong = PlacementRepo(with_token(server.url(REPO), WRONG), git.path, ca_file=pki.ca)
    errors = []
    for attempt in (wrong.fetch, lambda: wrong.push(sha, "main")):
        with pytest.raises(GitError, match="refused the credentials") as caught:
            attempt()
        errors.append(f"{caught.value} <- {caught.value.__cause__}")
    texts = {"the errors": "\n".join(errors), "the logs": caplog.text}
    assert_nowhere(TOKEN, texts=texts, state=state)
    assert_nowhere(WRONG, texts=texts, state=state)
    assert (git.path / "config").read_text().count(f"url = {server.url(REPO)}\n") == 1


def two_repositories(tmp_path: Path) -> tuple[ConfigRemote, ConfigRemote]:
    """Repository A (with a branch B lacks) and B (another history, another head)."""
    a = ConfigRemote(tmp_path / "a")
    a.commit("config in A", copy_from=SAMPLE)
    a.commit("a branch only A has", branch="only-in-a")
    a.work.git.tag("v-only-in-a")
    a.work.git.push("origin", "refs/tags/v-only-in-a")
    b = ConfigRemote(tmp_path / "b")
    b.commit("config in B", copy_from=SAMPLE, files={"environments/studio-a/services/egress.yaml": None})
    return a, b


def changed_lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if "repository URL changed" in r.getMessage()]


def test_config_sync_follows_a_changed_repo_url_after_a_restart(
    tmp_path: Path, mosquitto: Mosquitto, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    a, b = two_repositories(tmp_path)
    settings = SyncSettings(
        repo_url=str(a.bare_path),
        state_dir=str(tmp_path / "state"),
        poll_s=3600,
        debounce_s=0,
        mqtt=MqttSettings(url=mosquitto.url),
    )

    with running_sync(settings) as service:
        wait_until(lambda: published_commit(mosquitto.url) == bare_head(a), "A's head published", 30)
        assert service.git.has_branch("only-in-a")
    assert changed_lines(caplog) == []

    with running_sync(replace(settings, repo_url=str(b.bare_path))) as service:
        wait_until(
            lambda: published_commit(mosquitto.url) == bare_head(b),
            "B's head published after the restart",
            30,
        )
        assert not service.git.has_branch("only-in-a")  # A's refs are pruned
        assert service.git.head("main") == bare_head(b)
    assert changed_lines(caplog) == [f"repository URL changed from {a.bare_path} to {b.bare_path}"]
    config = (tmp_path / "state" / "config-sync" / "config-repo.git" / "config").read_text()
    assert str(b.bare_path) in config and str(a.bare_path) not in config


def test_placement_follows_a_changed_repo_url(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    a, b = two_repositories(tmp_path)
    cache = tmp_path / "state" / "placement" / "repo.git"
    first = PlacementRepo(str(a.bare_path), cache)
    first.fetch()
    assert first.head("main") == bare_head(a) and first.branch_head("only-in-a") is not None
    assert first.is_tag("v-only-in-a")

    again = PlacementRepo(str(b.bare_path), cache)  # a restart with the new setting
    again.fetch()
    assert again.head("main") == bare_head(b)
    assert again.branch_head("only-in-a") is None and not again.is_tag("v-only-in-a")  # A's refs pruned
    sha = again.commit_file(again.head("main"), NODE_JSON, b"{}\n", "placement studio-a: test")
    again.push(sha, "main")
    assert bare_head(b) == sha and bare_head(a) != sha  # written to B, A untouched
    assert changed_lines(caplog) == [f"repository URL changed from {a.bare_path} to {b.bare_path}"]
    again.fetch()
    assert len(changed_lines(caplog)) == 1  # said once


def test_a_cache_holding_a_token_in_its_url_loses_it_at_the_next_start(
    tmp_path: Path, remote: ConfigRemote, server: GitHttpServer, pki: Pki, caplog: pytest.LogCaptureFixture
) -> None:
    """Earlier versions stored the URL as given: the first fetch rewrites it without the token."""
    caplog.set_level(logging.INFO)
    url = with_token(server.url(REPO), TOKEN)
    sync = SyncRepo(url, tmp_path / "state", ca_file=pki.ca)
    placement = PlacementRepo(url, tmp_path / "state" / "placement" / "repo.git", ca_file=pki.ca)
    for path in (sync.path, placement.path):
        git.Repo.init(path, bare=True).create_remote("origin", url)  # as an old version left it
        assert TOKEN in (path / "config").read_text()
    sync.fetch()
    placement.fetch()
    assert sync.head("main") == placement.head("main") == bare_head(remote)
    assert (
        changed_lines(caplog)
        == [
            f"repository URL changed from {server.url(REPO).replace('https://', 'https://***@')} to {server.url(REPO)}"
        ]
        * 2
    )
    assert_nowhere(TOKEN, texts={"the logs": caplog.text}, state=tmp_path / "state")
