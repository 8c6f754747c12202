"""config-sync's fetch and placement's fetch and push over HTTPS with a GitLab token.

A real ``git http-backend`` behind TLS on 127.0.0.1 (tests/support/git_http.py) wants
HTTP Basic ``oauth2:<token>`` as GitLab does; its CA is private, given to git as
PHRAME_GIT_CA_FILE. The server also reads every process's argv while a request is in
flight, so "the token is never on a command line" is checked, not assumed.
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from config_sync.intake.clone import SyncRepo
from config_sync.reporting import LocalReporter
from config_sync.service import ConfigSync
from config_sync.settings import SyncSettings
from phrame.git import GitError, PushRejected
from placement.git_repo import PlacementRepo
from placement.loop import build_loop
from placement.settings import PlacementSettings
from tests.support.certs import Pki, make_pki
from tests.support.git_http import GitHttpServer
from tests.support.services import require_binary
from tests.support.sync_support import ConfigRemote

pytestmark = pytest.mark.slow

TOKEN = "glpat-Phr4me-https-test-token"
WRONG = "glpat-not-the-right-one-0000"
NODE_JSON = "environments/studio-a/node.json"
REPO = "phrame-config.git"


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(("127.0.0.1",), directory=tmp_path_factory.mktemp("pki"))


@pytest.fixture
def remote(tmp_path: Path) -> ConfigRemote:
    return ConfigRemote.with_sample(
        tmp_path / "srv", "initial config", http_push=True
    )  # the bare repo is srv/phrame-config.git


@pytest.fixture
def server(remote: ConfigRemote, pki: Pki) -> Iterator[GitHttpServer]:
    require_binary("git", "git")
    with GitHttpServer(remote.bare_path.parent, token=TOKEN, cert=pki.server_cert, key=pki.server_key) as srv:
        yield srv


def bare_head(remote: ConfigRemote, ref: str = "main") -> str:
    return str(remote.work.git.execute(["git", "--git-dir", str(remote.bare_path), "rev-parse", ref]))


def assert_no_credentials_on_disk(clone: Path, url: str) -> None:
    config = (clone / "config").read_text()
    assert f"url = {url}\n" in config  # the plain URL, no user:token@
    assert TOKEN not in config and "oauth2" not in config and "extraheader" not in config.lower()


def test_config_sync_fetches_over_https_with_the_token(
    tmp_path: Path, remote: ConfigRemote, server: GitHttpServer, pki: Pki
) -> None:
    url = server.url(REPO)
    repo = SyncRepo(url, tmp_path / "state", token=TOKEN, ca_file=pki.ca)
    repo.fetch()
    first = bare_head(remote)
    assert repo.head("main") == first
    loaded, problems = repo.load(first)
    assert problems == [] and loaded is not None
    second = remote.commit("change", files={"README.md": "changed\n"})
    repo.fetch()  # the existing cache is brought up to date
    assert repo.head("main") == second != first

    seen = server.seen()
    assert {(r.method, r.path.split("?")[0]) for r in seen} >= {
        ("GET", f"/{REPO}/info/refs"),
        ("POST", f"/{REPO}/git-upload-pack"),
    }
    assert all(r.is_authorized and r.user == "oauth2" and r.status == 200 for r in seen)
    assert all(TOKEN not in r.path for r in seen)
    assert server.argv_scans >= len(seen) and server.argv_leaks == []
    assert_no_credentials_on_disk(repo.path, url)


@pytest.mark.parametrize("token", [WRONG, None], ids=["wrong-token", "no-token"])
def test_config_sync_with_a_bad_token_fails_clearly_without_the_token(
    tmp_path: Path, server: GitHttpServer, pki: Pki, token: str | None
) -> None:
    repo = SyncRepo(server.url(REPO), tmp_path / "state", token=token, ca_file=pki.ca)
    with pytest.raises(GitError, match=r"refused the credentials.*PHRAME_GITLAB_TOKEN") as caught:
        repo.fetch()
    message = str(caught.value)
    assert server.url(REPO) in message
    assert WRONG not in message and TOKEN not in message
    assert WRONG not in str(caught.value.__cause__)
    seen = server.seen()
    assert seen and all(r.status == 401 and not r.is_authorized for r in seen)
    assert not repo.has_branch("main")


def test_without_the_ca_tls_verification_fails_clearly(
    tmp_path: Path, server: GitHttpServer, pki: Pki
) -> None:
    sync = SyncRepo(server.url(REPO), tmp_path / "sync", token=TOKEN)
    with pytest.raises(GitError, match=r"certificate.*PHRAME_GIT_CA_FILE") as caught:
        sync.fetch()
    assert TOKEN not in str(caught.value)
    placement = PlacementRepo(server.url(REPO), tmp_path / "placement.git", token=TOKEN)
    with pytest.raises(GitError, match=r"certificate.*PHRAME_GIT_CA_FILE"):
        placement.fetch()
    other_ca = make_pki(("127.0.0.1",), directory=tmp_path / "other-pki").ca
    with pytest.raises(GitError, match="certificate"):
        SyncRepo(server.url(REPO), tmp_path / "other", token=TOKEN, ca_file=other_ca).fetch()
    assert server.seen() == []  # no request (so no token) ever reached the server


def test_placement_commits_and_pushes_over_https_as_a_compare_and_swap(
    tmp_path: Path, remote: ConfigRemote, server: GitHttpServer, pki: Pki
) -> None:
    url = server.url(REPO)
    repo = PlacementRepo(url, tmp_path / "cache.git", token=TOKEN, ca_file=pki.ca)
    repo.fetch()
    parent = repo.head("main")
    assert parent == bare_head(remote)
    doc = {"assignments": {"egress": ["core-01"]}}
    ours = repo.commit_file(parent, NODE_JSON, json.dumps(doc).encode(), "placement studio-a: test")
    repo.push(ours, "main")
    assert bare_head(remote) == ours and bare_head(remote, "main~1") == parent
    shown = remote.work.git.execute(["git", "--git-dir", str(remote.bare_path), "show", f"main:{NODE_JSON}"])
    assert json.loads(shown) == doc

    stale = repo.commit_file(parent, NODE_JSON, b"{}", "placement from a stale parent")
    with pytest.raises(PushRejected, match="rejected"):
        repo.push(stale, "main")
    assert bare_head(remote) == ours  # not forced
    remote.work.git.fetch("origin")
    remote.work.git.reset("--hard", "origin/main")
    theirs = remote.commit("someone else's change", files={"README.md": "theirs\n"})
    late = repo.commit_file(ours, NODE_JSON, b"{}", "placement on what we fetched")
    with pytest.raises(PushRejected, match="the branch moved"):
        repo.push(late, "main")  # the remote moved since our fetch
    assert bare_head(remote) == theirs

    seen = server.seen()
    adverts = [r for r in seen if r.path == f"/{REPO}/info/refs?service=git-receive-pack"]
    packs = [r for r in seen if r.path == f"/{REPO}/git-receive-pack"]
    assert len(adverts) == 3 and len(packs) == 1  # git refuses a non-fast-forward before sending it
    assert all(r.is_authorized and r.user == "oauth2" for r in seen)
    assert server.argv_leaks == [] and server.argv_scans >= len(server.seen())
    assert_no_credentials_on_disk(repo.path, url)


def test_placement_with_a_wrong_token_is_an_error_not_a_rejection(
    tmp_path: Path, remote: ConfigRemote, server: GitHttpServer, pki: Pki
) -> None:
    cache = tmp_path / "cache.git"
    good = PlacementRepo(server.url(REPO), cache, token=TOKEN, ca_file=pki.ca)
    good.fetch()
    sha = good.commit_file(good.head("main"), NODE_JSON, b"{}\n", "placement")
    bad = PlacementRepo(server.url(REPO), cache, token=WRONG, ca_file=pki.ca)
    for attempt in (bad.fetch, lambda: bad.push(sha, "main")):
        with pytest.raises(GitError, match="refused the credentials") as caught:
            attempt()
        assert not isinstance(caught.value, PushRejected)  # a retry would not help
        assert WRONG not in str(caught.value) and TOKEN not in str(caught.value)
    assert bare_head(remote) != sha
    assert [r.status for r in server.seen()][-2:] == [401, 401]


def test_services_wire_token_and_ca_from_the_environment(
    tmp_path: Path, remote: ConfigRemote, server: GitHttpServer, pki: Pki
) -> None:
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN + "\n")
    env = {
        "PHRAME_REPO_URL": server.url(REPO),
        "PHRAME_GIT_HOST": "gitlab",
        "PHRAME_GITLAB_URL": "https://gitlab.example.test",
        "PHRAME_GITLAB_PROJECT": "g/phrame-config",
        "PHRAME_GITLAB_TOKEN_FILE": str(token_file),
        "PHRAME_WEBHOOK_SECRET": "s",
        "PHRAME_GIT_CA_FILE": str(pki.ca),
        "PHRAME_STATE_DIR": str(tmp_path / "state"),
    }
    sync = ConfigSync(SyncSettings.from_env(env), reporter=LocalReporter())
    sync.git.fetch()
    assert sync.git.head("main") == bare_head(remote)

    loop = build_loop(PlacementSettings.from_env(env))  # its MQTT clients are never started
    loop.reconciler.git.fetch()
    assert loop.reconciler.git.head("main") == bare_head(remote)
    assert_no_credentials_on_disk(loop.reconciler.git.path, server.url(REPO))
    assert server.seen() and all(r.is_authorized for r in server.seen())
    assert server.argv_leaks == []


def test_the_argv_probe_sees_a_token_put_in_a_url(server: GitHttpServer, pki: Pki) -> None:
    """The control for the argv checks above: a credential URL reaches git-remote-https's argv."""
    url = server.url(REPO).replace("https://", f"https://oauth2:{TOKEN}@")
    env = dict(os.environ, GIT_SSL_CAINFO=str(pki.ca), GIT_TERMINAL_PROMPT="0")
    subprocess.run(["git", "ls-remote", url], env=env, check=True, capture_output=True, timeout=60)
    assert [r.status for r in server.seen()][-1] == 200  # curl sends URL credentials after a 401
    assert any("git" in leak for leak in server.argv_leaks)
    basic = base64.b64encode(f"oauth2:{TOKEN}".encode()).decode()
    assert basic not in "".join(server.argv_leaks)  # leaks name the process, never the secret


def test_placement_push_to_a_protected_branch_is_an_error_not_a_rejection(
    tmp_path: Path, remote: ConfigRemote, server: GitHttpServer, pki: Pki
) -> None:
    """GitLab refuses a push to a protected branch in a pre-receive hook; retrying cannot help."""
    hook = remote.bare_path / "hooks" / "pre-receive"
    hook.write_text(
        "#!/bin/sh\necho 'GitLab: You are not allowed to push code to protected branches on this project.'"
        " >&2\nexit 1\n"
    )
    hook.chmod(0o755)
    repo = PlacementRepo(server.url(REPO), tmp_path / "cache.git", token=TOKEN, ca_file=pki.ca)
    repo.fetch()
    head = repo.head("main")
    sha = repo.commit_file(head, NODE_JSON, b"{}\n", "placement")
    with pytest.raises(GitError, match="not allowed to push code to protected branches") as caught:
        repo.push(sha, "main")
    assert not isinstance(caught.value, PushRejected)
    assert bare_head(remote) == head
