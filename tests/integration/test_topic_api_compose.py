"""The compose routes of the topic API through real uvicorn, mirrors and mosquitto, with a real
bare git repository (the sample config repo) and, for GitLab, canned GitLab answers served
over real HTTP: the export equals ``phrame export-compose``; an import opens a branch for
review that validates and leaves ``main`` alone, is refused twice, on bad input and without
the token; with GitLab it sends one branch-creating commit and one merge request.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import git
import httpx
import pytest

from phrame.config_repo import load_git, render, validate
from phrame.mqtt import MqttClient, MqttSettings
from schemas import Topics
from tests.support.canned_gitlab import HEAD, PROJECT, CannedGitLab
from tests.support.mosquitto import Mosquitto
from tests.support.sync_support import ConfigRemote
from tests.support.topic_api import ROOT, ApiStack

pytestmark = [pytest.mark.mqtt, pytest.mark.slow]
COMPOSE = ROOT / "fixtures" / "compose"
FLASK = (COMPOSE / "flask-redis.yml").read_text()
VOTING = (COMPOSE / "voting-app-stack.yml").read_text()
BRANCH = re.compile(r"^phrame-import/shop-[0-9a-f]{8}$")


@pytest.fixture(scope="module")
def broker() -> Iterator[Mosquitto]:
    b = Mosquitto().start()
    yield b
    b.stop()


@pytest.fixture(scope="module")
def remote(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ConfigRemote]:
    r = ConfigRemote.with_sample(tmp_path_factory.mktemp("remote"))
    yield r
    r.work.close()


@pytest.fixture(scope="module")
def stack(
    broker: Mosquitto, remote: ConfigRemote, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ApiStack]:
    """The sample's desired plane retained on the broker (as config-sync publishes it) and an
    API whose imports go to the sample's bare repository."""
    repo, problems = load_git(remote.bare_path, "main")  # as config-sync renders it
    assert validate(repo, problems) == []
    topics = render(repo).topics(Topics())
    writer = MqttClient(MqttSettings(url=broker.url), "compose-api-writer")
    writer.start(timeout=5)
    try:
        writer.publish_batch((t, json.dumps(p).encode()) for t, p in topics.items())
    finally:
        writer.stop()
    s = ApiStack(
        broker.url,
        tmp_path_factory.mktemp("api"),
        PHRAME_GIT_HOST="local",
        PHRAME_REPO_URL=str(remote.bare_path),
    ).start()
    try:
        s.wait_json("/api/nodes", lambda d: len(d["nodes"]) == 4, "the sample's four nodes")
        yield s
    finally:
        s.stop()


def bare_branches(remote: ConfigRemote) -> dict[str, str]:
    with git.Repo(remote.bare_path) as bare:
        return {h.name: h.commit.hexsha for h in bare.heads}


def post(stack: ApiStack, body: str, token: str | None = "default", **params: str) -> httpx.Response:
    return stack.post("/api/import/compose", params=params, content=body.encode(), token=token)


def test_export_of_a_node_equals_phrame_export_compose(stack: ApiStack, remote: ConfigRemote) -> None:
    cli = subprocess.run(
        [sys.executable, "-m", "phrame", "export-compose", "--node", "core-01", "--repo", str(remote.bare_path)],
        capture_output=True, text=True, cwd=ROOT, timeout=60,
    )  # fmt: skip
    assert cli.returncode == 0, cli.stderr
    r = stack.get("/api/nodes/core-01/compose")
    assert r.status_code == 200, r.text
    assert r.headers["content-type"].startswith("application/yaml")
    assert "content-disposition" not in r.headers
    assert r.text == cli.stdout
    assert "services:" in r.text
    dl = stack.get("/api/nodes/core-01/compose", params={"download": "1"})
    assert dl.headers["content-disposition"] == 'attachment; filename="core-01-docker-compose.yml"'
    missing = stack.get("/api/nodes/no-such-node/compose")
    assert missing.status_code == 404 and "no-such-node" in missing.json()["error"]


def test_import_opens_a_branch_that_validates_and_leaves_main_alone(
    stack: ApiStack, remote: ConfigRemote, tmp_path: Path
) -> None:
    main = bare_branches(remote)["main"]
    r = post(stack, VOTING, env="shop", node="core-01")
    assert r.status_code == 201, r.text
    doc = r.json()
    branch = doc["branch"]
    assert BRANCH.match(branch), branch
    assert doc["merge_request"] is None
    assert doc["validation"] == {"valid": True, "scope": "repository", "base": main, "existing_problems": 0}
    assert "environments/shop/services/vote.yaml" in doc["files"]
    assert {"service", "key", "reason"} == set(doc["unsupported"][0])
    heads = bare_branches(remote)
    assert heads["main"] == main  # an import is a proposal, never a deployment
    assert heads[branch] == doc["commit"]
    with git.Repo(remote.bare_path) as bare:
        commit = bare.commit(branch)
        assert [p.hexsha for p in commit.parents] == [main]
        for path, text in doc["files"].items():
            assert (commit.tree / path).data_stream.read().decode() == text
        assert not any(
            t.startswith("refs/tags/") for t in bare.git.for_each_ref("--format=%(refname)").split()
        )
    # a person's clone sees the branch on fetch, and the branch validates as a whole
    remote.work.git.fetch("origin")
    assert f"origin/{branch}" in remote.work.git.branch("-r")
    check = subprocess.run(
        [sys.executable, "-m", "phrame", "validate", str(remote.bare_path), "--ref", branch],
        capture_output=True, text=True, cwd=ROOT, timeout=60,
    )  # fmt: skip
    assert check.returncode == 0, check.stdout + check.stderr
    # the same import again names the same branch: refused, nothing moves
    again = post(stack, VOTING, env="shop", node="core-01")
    assert again.status_code == 409, again.text
    assert branch in again.json()["error"]
    assert bare_branches(remote) == heads


def test_a_dry_run_or_a_refused_import_writes_nothing(stack: ApiStack, remote: ConfigRemote) -> None:
    before = bare_branches(remote)
    dry = post(stack, FLASK, env="dryshop", node="core-01", dry_run="true")
    assert dry.status_code == 200, dry.text
    assert dry.json()["branch"] is None and dry.json()["dry_run"] is True
    assert set(dry.json()["files"]) >= {"environments/dryshop/environment.yaml"}
    # the security review's file: every setting it keeps that is worth root is listed
    hostile = "services:\n  app:\n    image: busybox\n    privileged: true\n    volumes: ['/:/host', "
    hostile += "'/var/run/docker.sock:/var/run/docker.sock']\n    ports: ['2375:2375']\n"
    risky = post(stack, hostile, env="dryshop", node="core-01", dry_run="true")
    assert risky.status_code == 200, risky.text
    assert [(d["service"], d["key"]) for d in risky.json()["dangerous"]] == [
        ("app", "volumes[0]"),
        ("app", "volumes[1]"),
        ("app", "ports[0]"),
    ]
    assert [u["key"] for u in risky.json()["unsupported"]] == ["privileged"]
    bad = post(stack, "services:\n  web:\n    image: nginx\n   ports: [80]\n", env="shop")
    assert bad.status_code == 400, bad.text
    assert bad.json()["error"].startswith("compose file:4:"), bad.text
    unknown = post(stack, FLASK, env="shop", node="nowhere-9")
    assert unknown.status_code == 422, unknown.text
    problems = unknown.json()["problems"]
    assert problems and problems[0]["rule"] == "unknown-node"
    assert problems[0]["file"].startswith("environments/shop/services/") and problems[0]["line"] > 0
    assert post(stack, FLASK, token=None, env="shop").status_code == 401
    assert post(stack, FLASK, token="wrong", env="shop").status_code == 401
    assert post(stack, FLASK, env="Not A Name").status_code == 400
    assert post(stack, FLASK).status_code == 400  # no env
    assert post(stack, "x" * 300_000, env="shop").status_code == 413
    assert bare_branches(remote) == before


def test_gitlab_import_creates_branch_commit_and_merge_request(broker: Mosquitto, tmp_path: Path) -> None:
    existing = "environments/shop/environment.yaml"
    gitlab = CannedGitLab(tree=[existing, "environments/shop/services/redis.yaml"]).start()
    s = ApiStack(
        broker.url,
        tmp_path,
        PHRAME_GIT_HOST="gitlab",
        PHRAME_GITLAB_URL=gitlab.url,
        PHRAME_GITLAB_TOKEN="glpat-canned",
        PHRAME_GITLAB_PROJECT=PROJECT,
    )
    try:
        s.start(mirrors=False)
        r = post(s, FLASK, env="shop", node="core-01")
        assert r.status_code == 201, r.text + s.logs()
        doc = r.json()
        branch = doc["branch"]
        assert BRANCH.match(branch) and doc["validation"]["scope"] == "files"
        assert doc["kept"] == [existing] and existing not in doc["files"]
        assert all(req["token"] == "glpat-canned" for req in gitlab.requests)
        [commit] = gitlab.calls("POST", "/repository/commits")
        body = commit["json"]
        assert body["branch"] == branch and body["start_sha"] == HEAD and "branch_name" not in body
        actions = {a["file_path"]: a for a in body["actions"]}
        assert set(actions) == set(doc["files"])
        assert actions["environments/shop/services/redis.yaml"]["action"] == "update"
        assert actions["environments/shop/networks/default.yaml"]["action"] == "create"
        assert all(a["content"] == doc["files"][p] for p, a in actions.items())
        [mr] = gitlab.calls("POST", "/merge_requests")
        assert mr["json"]["source_branch"] == branch and mr["json"]["target_branch"] == "main"
        for u in doc["unsupported"]:
            assert u["reason"] in mr["json"]["description"]
        assert doc["merge_request"] == {
            "iid": 1,
            "web_url": f"https://gitlab.example.test/{PROJECT}/-/merge_requests/1",
        }
        # nothing was written to main: the only write is the commit that creates the new branch
        writes = [q for q in gitlab.requests if q["method"] != "GET"]
        assert [w["path"].rsplit("/", 1)[-1] for w in writes] == ["commits", "merge_requests"]
        again = post(s, FLASK, env="shop", node="core-01")
        assert again.status_code == 409, again.text
        assert len(gitlab.calls("POST", "/repository/commits")) == 1
    finally:
        s.stop()
        gitlab.stop()


def test_gitlab_import_that_does_not_validate_on_its_own_is_refused(
    broker: Mosquitto, tmp_path: Path
) -> None:
    gitlab = CannedGitLab().start()
    s = ApiStack(
        broker.url,
        tmp_path,
        PHRAME_GIT_HOST="gitlab",
        PHRAME_GITLAB_URL=gitlab.url,
        PHRAME_GITLAB_TOKEN="glpat-canned",
        PHRAME_GITLAB_PROJECT=PROJECT,
    )
    cycle = "services:\n  a:\n    image: nginx\n    depends_on: [b]\n  b:\n    image: nginx\n    depends_on: [a]\n"
    try:
        s.start(mirrors=False)
        r = post(s, cycle, env="shop", node="core-01")
        assert r.status_code == 422, r.text
        [problem] = r.json()["problems"]
        assert problem["rule"] == "dependency-cycle" and problem["file"].startswith("environments/shop/")
        assert [q for q in gitlab.requests if q["method"] != "GET"] == []
    finally:
        s.stop()
        gitlab.stop()


def test_gitlab_refusing_the_merge_request_names_the_branch_it_left(
    broker: Mosquitto, tmp_path: Path
) -> None:
    gitlab = CannedGitLab().start()
    gitlab.merge_requests_refused = True
    s = ApiStack(
        broker.url,
        tmp_path,
        PHRAME_GIT_HOST="gitlab",
        PHRAME_GITLAB_URL=gitlab.url,
        PHRAME_GITLAB_TOKEN="glpat-canned",
        PHRAME_GITLAB_PROJECT=PROJECT,
    )
    try:
        s.start(mirrors=False)
        r = post(s, FLASK, env="shop")
        assert r.status_code == 503, r.text
        [commit] = gitlab.calls("POST", "/repository/commits")
        branch = commit["json"]["branch"]
        assert f"branch {branch} was written" in r.json()["error"] and "403" in r.json()["error"]
    finally:
        s.stop()
        gitlab.stop()
