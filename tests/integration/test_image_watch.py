"""The image watcher against a real registry (Debian's docker-registry, images pushed in the
test through the v2 API with a chosen ``created``) and a real bare git repository: a new tag
inside the policy gives exactly one branch pinning its digest, however often the watcher
runs; tags outside the range are ignored; ``min_age`` holds a young image back; the service
proposes on its own and stops on SIGTERM; with GitLab
(canned, over HTTP) the same branch comes with one merge request."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import git
import pytest

from image_watch.build import build_watcher
from image_watch.settings import WatchSettings
from image_watch.watcher import ImageWatcher
from phrame.cli import main
from tests.support.canned_gitlab import PROJECT, CannedGitLab
from tests.support.processes import end
from tests.support.registry import Registry
from tests.support.registry_images import push_image
from tests.support.sync_support import ConfigRemote
from tests.support.waiting import wait_for

NOW = datetime.now(UTC)
OLD = NOW - timedelta(days=2)
NODE = "name: n1\nlabels: {role: edge}\n"


def _repo(tmp_path: Path, image: str, policy: str) -> ConfigRemote:
    remote = ConfigRemote(tmp_path / "git")
    remote.commit(
        "sample",
        files={
            "nodes/n1.yaml": NODE,
            "environments/lab/environment.yaml": f"name: lab\nimages:\n  web:\n{policy}",
            # a policy that fails its schema: skipped (validation reports it), the pass goes on
            "environments/broken/environment.yaml": "name: broken\nimages:\n  web: 5\n",
            "environments/lab/services/web.yaml": (
                "# the web front\nname: web\nimage: " + image + "  # bumped by image-watch\n"
                "placement:\n  node: n1\n"
            ),
        },
    )
    return remote


def _settings(tmp_path: Path, remote: ConfigRemote, registry: Registry, **extra: object) -> WatchSettings:
    auth = tmp_path / "config.json"
    pair = base64.b64encode(f"{registry.username}:{registry.password}".encode()).decode()
    auth.write_text(json.dumps({"auths": {registry.url: {"auth": pair}}}))
    return WatchSettings(
        repo_url=str(remote.bare_path),
        state_dir=tmp_path / "state",
        auth_file=auth,
        plain_http=frozenset({registry.url}),
        **extra,  # type: ignore[arg-type]
    )


def _update_branches(remote: ConfigRemote) -> dict[str, str]:
    bare = git.Repo(remote.bare_path)
    try:
        return {r.path.removeprefix("refs/heads/"): r.commit.hexsha for r in bare.references
                if r.path.startswith("refs/heads/image-update/")}  # fmt: skip
    finally:
        bare.close()


def _file_at(remote: ConfigRemote, sha: str, path: str) -> str:
    bare = git.Repo(remote.bare_path)
    try:
        return bytes(bare.commit(sha).tree[path].data_stream.read()).decode()
    finally:
        bare.close()


@pytest.mark.slow
def test_a_new_tag_gives_exactly_one_branch_with_the_digest_pinned(
    tmp_path: Path, registry: Registry, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = "lab/web-one"
    push_image(registry, repo, "1.2.0", created=OLD)
    remote = _repo(tmp_path, f"{registry.url}/{repo}:1.2.0", '    semver: "^1.2"\n    min_age: 1h\n')
    main = remote.work.head.commit.hexsha
    settings = _settings(tmp_path, remote, registry)

    first = build_watcher(settings).run_once()
    assert [(o.service, o.state) for o in first] == [("web", "up-to-date")]

    digest = push_image(registry, repo, "1.3.0", created=OLD, index=True)  # a multi-platform image
    push_image(registry, repo, "2.0.0", created=OLD)  # outside ^1.2
    push_image(registry, repo, "1.4.0-rc.1", created=OLD)  # a pre-release: not allowed
    push_image(registry, repo, "latest", created=OLD)

    outcomes = build_watcher(settings).run_once()
    assert [(o.state, o.detail) for o in outcomes] == [("proposed", "image-update/lab/web/1.3.0")]
    assert (
        f"lab/web: {registry.url}/{repo}:1.2.0 -> {registry.url}/{repo}:1.3.0@{digest}"
        in capsys.readouterr().out
    )

    branches = _update_branches(remote)
    assert list(branches) == ["image-update/lab/web/1.3.0"]
    sha = branches["image-update/lab/web/1.3.0"]
    text = _file_at(remote, sha, "environments/lab/services/web.yaml")
    assert text == (
        f"# the web front\nname: web\nimage: {registry.url}/{repo}:1.3.0@{digest}  # bumped by image-watch\n"
        "placement:\n  node: n1\n"
    )
    bare = git.Repo(remote.bare_path)
    try:
        commit = bare.commit(sha)
        assert [p.hexsha for p in commit.parents] == [main]
        assert set(commit.stats.files) == {"environments/lab/services/web.yaml"}
        assert bare.heads.main.commit.hexsha == main  # the tracked branch is never written
        assert not bare.tags
    finally:
        bare.close()

    for _ in range(2):  # again, and after a restart (a new watcher, the same repository): still one
        again = build_watcher(settings).run_once()
        assert [(o.state, o.detail) for o in again] == [("already-proposed", "image-update/lab/web/1.3.0")]
    assert _update_branches(remote) == branches


@pytest.mark.slow
def test_min_age_holds_a_young_image_back_and_a_newer_one_supersedes(
    tmp_path: Path, registry: Registry, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = "lab/web-age"
    push_image(registry, repo, "1.2.0", created=OLD)
    remote = _repo(tmp_path, f"{registry.url}/{repo}:1.2.0", '    semver: "~1.2.0"\n    min_age: 1h\n')
    settings = _settings(tmp_path, remote, registry)
    push_image(registry, repo, "1.2.9", created=NOW - timedelta(minutes=5))

    young = build_watcher(settings).run_once()
    assert [o.state for o in young] == ["too-young"]
    assert _update_branches(remote) == {}

    push_image(registry, repo, "1.2.3", created=NOW - timedelta(hours=3))  # lower, but old enough
    assert [o.detail for o in build_watcher(settings).run_once()] == ["image-update/lab/web/1.2.3"]

    built = build_watcher(settings)
    later = ImageWatcher(
        built.git, built.target, track="main", credentials=built.credentials,
        plain_http=built.plain_http, clock=lambda: NOW + timedelta(hours=2),
    )  # fmt: skip
    assert [o.detail for o in later.run_once()] == ["image-update/lab/web/1.2.9"]
    assert sorted(_update_branches(remote)) == ["image-update/lab/web/1.2.3", "image-update/lab/web/1.2.9"]
    assert "it supersedes image-update/lab/web/1.2.3" in capsys.readouterr().out


@pytest.mark.slow
def test_with_gitlab_the_branch_comes_with_one_merge_request(tmp_path: Path, registry: Registry) -> None:
    repo = "lab/web-gitlab"
    push_image(registry, repo, "1.2.0", created=OLD)
    remote = _repo(tmp_path, f"{registry.url}/{repo}:1.2.0", '    pattern: "^1\\\\.(\\\\d+)\\\\.0$"\n')
    main = remote.work.head.commit.hexsha
    digest = push_image(registry, repo, "1.10.0", created=OLD)
    push_image(registry, repo, "1.9.0", created=OLD)
    canned = CannedGitLab(branches={"main": main}).start()
    try:
        settings = _settings(
            tmp_path, remote, registry,
            git_host="gitlab", gitlab_url=canned.url, gitlab_token="glpat-test", gitlab_project=PROJECT,
        )  # fmt: skip
        for _ in range(3):
            build_watcher(settings).run_once()
        commits = canned.calls("POST", "/repository/commits")
        assert len(commits) == 1
        body = commits[0]["json"]
        assert body["branch"] == "image-update/lab/web/1.10.0"
        assert body["start_sha"] == main
        assert body["actions"][0]["file_path"] == "environments/lab/services/web.yaml"
        assert f"image: {registry.url}/{repo}:1.10.0@{digest}  #" in body["actions"][0]["content"]
        opened = canned.calls("POST", "/merge_requests")
        assert len(opened) == 1
        assert opened[0]["json"]["source_branch"] == "image-update/lab/web/1.10.0"
        assert opened[0]["json"]["target_branch"] == "main"
        assert _update_branches(remote) == {}  # GitLab's API wrote it, not a push

        canned.merge_requests.clear()  # the watcher stopped between the branch and its merge request
        build_watcher(settings).run_once()
        assert len(canned.calls("POST", "/merge_requests")) == 2  # the missing one, once
        assert len(canned.calls("POST", "/repository/commits")) == 1
        canned.merge_requests[0]["state"] = "closed"  # a person declined it: it stays closed
        build_watcher(settings).run_once()
        assert len(canned.calls("POST", "/merge_requests")) == 2
    finally:
        canned.stop()


@pytest.mark.slow
def test_the_command_prints_each_outcome_and_exits_by_them(
    tmp_path: Path, registry: Registry, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:

    repo = "lab/web-cli"
    push_image(registry, repo, "1.2.0", created=OLD)
    remote = _repo(tmp_path, f"{registry.url}/{repo}:1.2.0", '    semver: "^1"\n')
    settings = _settings(tmp_path, remote, registry)
    push_image(registry, repo, "1.5.0", created=OLD)
    monkeypatch.setenv("PHRAME_REPO_URL", str(remote.bare_path))
    monkeypatch.setenv("PHRAME_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("PHRAME_REGISTRY_PLAIN_HTTP", registry.url)
    monkeypatch.setenv("PHRAME_REGISTRY_AUTH_FILE", str(settings.auth_file))

    assert main(["image-watch", "--once"]) == 0
    out = capsys.readouterr().out
    doc = json.loads(out[out.index("[") :])
    assert doc == [
        {"environment": "lab", "service": "web", "state": "proposed", "detail": "image-update/lab/web/1.5.0"}
    ]

    monkeypatch.setenv("PHRAME_REGISTRY_AUTH_FILE", str(tmp_path / "none.json"))  # anonymous: refused
    monkeypatch.setenv("PHRAME_STATE_DIR", str(tmp_path / "state2"))
    (tmp_path / "none.json").write_text('{"auths": {}}')
    assert main(["image-watch", "--once"]) == 1
    failed = json.loads(capsys.readouterr().out)
    assert failed[0]["state"] == "failed" and "answered 401" in failed[0]["detail"]

    (tmp_path / "none.json").write_text("not json")
    assert main(["image-watch", "--once"]) == 2
    assert "PHRAME_REGISTRY_AUTH_FILE" in capsys.readouterr().err


@pytest.mark.slow
def test_the_service_proposes_on_its_own_and_stops_on_sigterm(tmp_path: Path, registry: Registry) -> None:

    repo = "lab/web-loop"
    push_image(registry, repo, "1.2.0", created=OLD)
    remote = _repo(tmp_path, f"{registry.url}/{repo}:1.2.0", '    semver: "^1"\n')
    settings = _settings(tmp_path, remote, registry)
    push_image(registry, repo, "1.6.0", created=OLD)
    env = dict(
        os.environ,
        PHRAME_REPO_URL=str(remote.bare_path),
        PHRAME_STATE_DIR=str(tmp_path / "state"),
        PHRAME_REGISTRY_PLAIN_HTTP=registry.url,
        PHRAME_REGISTRY_AUTH_FILE=str(settings.auth_file),
        PHRAME_IMAGE_WATCH_INTERVAL_S="10",
    )
    log = (tmp_path / "watch.log").open("wb")
    proc = subprocess.Popen([sys.executable, "-m", "phrame", "image-watch"], env=env, stdout=log, stderr=log)
    try:
        wait_for(lambda: _update_branches(remote), "the watcher's first pass to push its branch", timeout=30,
                 interval=0.2, observe=lambda: (tmp_path / "watch.log").read_text())  # fmt: skip
        assert list(_update_branches(remote)) == ["image-update/lab/web/1.6.0"]
    finally:
        code = end(proc)
        log.close()
    assert code == 0, (tmp_path / "watch.log").read_text()
    assert "review and merge branch image-update/lab/web/1.6.0" in (tmp_path / "watch.log").read_text()
