"""The whole GitLab loop with python-gitlab against a canned GitLab (``responses``):
webhooks over real HTTP to the real app, a real git remote and mosquitto behind it.

A push leaves ``phrame/validate`` and ``phrame/deploy`` statuses on the head; a merge
request open then update leaves exactly one plan note, edited in place.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
import requests
import responses

from config_sync.reporting import GitLabReporter
from config_sync.service import ConfigSync
from schemas import Topics
from schemas.node_policy import NodePolicy
from tests.integration.test_sync_app import Running, serving
from tests.integration.test_sync_deploy import converged_on
from tests.integration.test_sync_publishing import carried, cli_render, without_sync
from tests.support.mosquitto import Mosquitto
from tests.support.services import eventually
from tests.support.sync_support import (
    SAMPLE,
    SECRET,
    ConfigRemote,
    desired_on_broker,
    reader,
    settings_for,
)
from tests.support.topic_api import heartbeat

GITLAB = "http://gitlab.example.test"
PROJECT = f"{GITLAB}/api/v4/projects/studio%2Fphrame-config"
JSON = {"Content-Type": "application/json"}
SERVICE = "name: asset-cache\nimage: registry.studio.test/cache:{tag}\nplacement:\n  node: core-01\n"


class CannedGitLab:
    """Just enough of GitLab's REST API: commit statuses and one MR's notes, kept in memory."""

    def __init__(self, mock: responses.RequestsMock) -> None:
        self.statuses: list[dict[str, Any]] = []
        self.notes: list[dict[str, Any]] = []
        self.writes: list[str] = []
        mock.add_callback(responses.POST, re.compile(rf"{re.escape(PROJECT)}/statuses/(\w+)"), self.status)
        notes = re.compile(rf"{re.escape(PROJECT)}/merge_requests/7/notes")
        mock.add_callback(responses.GET, notes, self.list_notes)
        mock.add_callback(responses.POST, notes, self.create_note)
        mock.add_callback(responses.PUT, re.compile(rf"{notes.pattern}/(\d+)"), self.edit_note)
        # Deployments API: list (filtered by environment), create, update the status
        self.deployments: list[dict[str, Any]] = []
        deployments = re.compile(rf"{re.escape(PROJECT)}/deployments")
        mock.add_callback(responses.GET, re.compile(rf"{deployments.pattern}(\?.*)?$"), self.list_deployments)
        mock.add_callback(responses.POST, deployments, self.create_deployment)
        mock.add_callback(responses.PUT, re.compile(rf"{deployments.pattern}/(\d+)"), self.update_deployment)

    def status(self, request: Any) -> tuple[int, dict[str, str], str]:
        sha = request.url.rsplit("/", 1)[-1]
        doc = {**json.loads(request.body), "sha": sha}
        self.statuses.append(doc)
        return 201, JSON, json.dumps({"id": len(self.statuses), "status": doc["state"], **doc})

    def list_deployments(self, request: Any) -> tuple[int, dict[str, str], str]:
        env = parse_qs(urlsplit(request.url).query).get("environment", [None])[0]
        found = [d for d in self.deployments if env is None or d["environment"]["name"] == env]
        return 200, JSON, json.dumps(sorted(found, key=lambda d: -d["id"]))

    def create_deployment(self, request: Any) -> tuple[int, dict[str, str], str]:
        body = json.loads(request.body)
        doc = {"id": 40 + len(self.deployments), "iid": len(self.deployments) + 1, "sha": body["sha"],
               "ref": body["ref"], "tag": body["tag"], "status": body["status"],
               "environment": {"id": 1, "name": body["environment"]}}  # fmt: skip
        self.deployments.append(doc)
        return 201, JSON, json.dumps(doc)

    def update_deployment(self, request: Any) -> tuple[int, dict[str, str], str]:
        found = next(d for d in self.deployments if d["id"] == int(request.url.rsplit("/", 1)[-1]))
        if found["status"] in ("success", "failed", "canceled"):  # GitLab: a finished one stays so
            return 400, JSON, json.dumps({"message": f"Cannot transition status via :{found['status']}"})
        found["status"] = json.loads(request.body)["status"]
        return 200, JSON, json.dumps(found)

    def list_notes(self, _request: Any) -> tuple[int, dict[str, str], str]:
        return 200, JSON, json.dumps(self.notes)

    def create_note(self, request: Any) -> tuple[int, dict[str, str], str]:
        note = {"id": 100 + len(self.notes), "body": json.loads(request.body)["body"], "system": False}
        self.notes.append(note)
        self.writes.append("create")
        return 201, JSON, json.dumps(note)

    def edit_note(self, request: Any) -> tuple[int, dict[str, str], str]:
        note_id = int(request.url.rsplit("/", 1)[-1])
        note = next(n for n in self.notes if n["id"] == note_id)
        note["body"] = json.loads(request.body)["body"]
        self.writes.append("edit")
        return 200, JSON, json.dumps(note)


@pytest.fixture
def gitlab_running(tmp_path: Path, mosquitto: Mosquitto) -> Iterator[tuple[Running, CannedGitLab]]:
    remote = ConfigRemote(tmp_path)
    remote.commit("sample", copy_from=SAMPLE)
    settings = settings_for(remote, tmp_path / "state", mosquitto.url, webhook_secret=SECRET, poll_s=3600)
    with responses.RequestsMock(assert_all_requests_are_fired=False) as mock:
        gitlab = CannedGitLab(mock)
        reporter = GitLabReporter(GITLAB, "glpat-test", "studio/phrame-config")
        service = ConfigSync(settings, reporter=reporter)
        with serving(service) as url:
            running = Running(service, url, remote)
            running.idle()
            yield running, gitlab
            running.http.close()


def test_push_reports_validate_and_deploy_statuses(gitlab_running: tuple[Running, CannedGitLab]) -> None:
    running, gitlab = gitlab_running
    head = running.remote.work.head.commit.hexsha
    states = [(s["sha"], s["name"], s["state"]) for s in gitlab.statuses]
    assert (head, "phrame/validate", "success") in states
    assert (head, "phrame/deploy", "running") in states
    bad = running.remote.commit("break", files={"nodes/core-01.yaml": "name: core-01\nbogus: 1\n"})
    assert running.post("push.json", **{"Idempotency-Key": "gl-1"}).status_code == 202
    running.idle()
    failed = [s for s in gitlab.statuses if s["sha"] == bad]
    assert [(s["name"], s["state"]) for s in failed] == [("phrame/validate", "failed")]
    assert failed[0]["description"].startswith("1 problem(s); first: nodes/core-01.yaml:2: ")
    assert failed[0]["ref"] == "main"


def test_each_deployment_is_a_gitlab_deployment_of_its_environment(
    gitlab_running: tuple[Running, CannedGitLab], mosquitto: Mosquitto
) -> None:
    """GitLab's Environments page shows which commit runs where: a deployment per environment
    the commit changed, created running, success once its nodes converged."""
    running, gitlab = gitlab_running
    first = running.remote.work.head.commit.hexsha
    envs = sorted(running.service.history.by_env)
    assert envs, "the sample deploys at least one environment"

    def statuses() -> dict[str, str]:
        return {d["environment"]["name"]: d["status"] for d in gitlab.deployments if d["sha"] == first}

    assert eventually(lambda: statuses() == dict.fromkeys(envs, "running")), gitlab.deployments
    assert all(d["ref"] == "main" and d["tag"] is False for d in gitlab.deployments)
    generations = running.service.syncer.last["main"].generations
    with reader(mosquitto.url, "fake-agents-envs") as agents:
        agents.publish_batch(converged_on(first, generations))
        assert eventually(lambda: statuses() == dict.fromkeys(envs, "success"), timeout=30), (
            gitlab.deployments
        )
    assert len(gitlab.deployments) == len(envs), "one deployment per environment and commit"


def test_a_commit_that_changes_nothing_gets_deploy_success(
    gitlab_running: tuple[Running, CannedGitLab], mosquitto: Mosquitto
) -> None:
    """No manifest published for any node, so nothing to wait for."""
    running, gitlab = gitlab_running
    first = running.remote.work.head.commit.hexsha
    generations = running.service.syncer.last["main"].generations
    with reader(mosquitto.url, "fake-agents") as agents:  # the sample's deploy converges first
        agents.publish_batch(converged_on(first, generations))
        deployed = (first, "phrame/deploy", "success")
        assert eventually(lambda: deployed in [(s["sha"], s["name"], s["state"]) for s in gitlab.statuses])
    noop = running.remote.commit("notes", files={"NOTES.md": "who to call\n"})
    assert running.post("push.json", **{"Idempotency-Key": "gl-noop"}).status_code == 202
    running.idle()
    mine = [(s["name"], s["state"], s.get("ref")) for s in gitlab.statuses if s["sha"] == noop]
    assert mine == [("phrame/validate", "success", "main"), ("phrame/deploy", "success", "main")]


@pytest.mark.slow
def test_merge_request_open_then_update_keeps_one_note(gitlab_running: tuple[Running, CannedGitLab]) -> None:
    running, gitlab = gitlab_running
    running.remote.commit(
        "add",
        branch="feature/x",
        files={"environments/studio-a/services/asset-cache.yaml": SERVICE.format(tag=1)},
    )
    assert running.post("merge-request-open.json").status_code == 202
    running.idle()
    running.remote.commit(
        "bump",
        branch="feature/x",
        files={"environments/studio-a/services/asset-cache.yaml": SERVICE.format(tag=2)},
    )
    assert running.post("merge-request-update.json").status_code == 202
    running.idle()
    assert gitlab.writes == ["create", "edit"]
    assert len(gitlab.notes) == 1
    body = gitlab.notes[0]["body"]
    assert (
        body.startswith("<!-- phrame:plan -->") and "| add | container | `studio-a.asset-cache.0` |" in body
    )
    head = running.remote.work.head.commit.hexsha
    assert any(
        s["sha"] == head and s["state"] == "success" and s["ref"] == "feature/x" for s in gitlab.statuses
    )


@pytest.mark.slow
def test_merge_request_plan_is_against_the_merge_base(gitlab_running: tuple[Running, CannedGitLab]) -> None:
    """feature/x adds asset-cache; meanwhile main gains probe. Merging would not remove
    probe, so the plan (like GitLab's own MR diff) compares with the merge base."""
    running, gitlab = gitlab_running
    work = running.remote.work
    work.git.checkout("-B", "feature/x", "origin/main")
    running.remote.commit(
        "add asset-cache",
        branch="feature/x",
        files={"environments/studio-a/services/asset-cache.yaml": SERVICE.format(tag=1)},
    )
    work.git.checkout("-B", "main", "origin/main")
    probe = "name: probe\nimage: registry.studio.test/probe:1\nplacement:\n  node: edge-01\n"
    running.remote.commit("add probe on main", files={"environments/studio-a/services/probe.yaml": probe})
    assert running.post("merge-request-open.json").status_code == 202
    running.idle()
    assert len(gitlab.notes) == 1
    body = gitlab.notes[0]["body"]
    assert "1 to add, 0 to change, 0 to remove." in body
    assert "| add | container | `studio-a.asset-cache.0` |" in body
    assert "probe" not in body


def test_gitlab_down_never_holds_a_deployment_back(tmp_path: Path, mosquitto: Mosquitto) -> None:
    remote = ConfigRemote(tmp_path)
    head = remote.commit("sample", copy_from=SAMPLE)
    settings = settings_for(remote, tmp_path / "state", mosquitto.url, poll_s=3600, debounce_s=0)
    with responses.RequestsMock(assert_all_requests_are_fired=False) as mock:
        mock.add(
            responses.POST,
            re.compile(rf"{re.escape(PROJECT)}/statuses/\w+"),
            json={"message": "502"},
            status=502,
        )
        service = ConfigSync(settings, reporter=GitLabReporter(GITLAB, "glpat-test", "studio/phrame-config"))
        service.start()
        try:
            assert service.queue.wait_idle(30)
            outcome = service.syncer.last["main"]
            assert outcome.ok and outcome.commit == head and len(outcome.messages) > 20
            assert len(mock.calls) >= 2  # validate and deploy were both tried
            assert service.queue.workers["ref:main"].failures == 0
        finally:
            service.stop()


@pytest.mark.slow
def test_gitlab_unreachable_still_publishes_exactly_the_rendering(
    tmp_path: Path, mosquitto: Mosquitto
) -> None:
    # python-gitlab lets requests.ConnectionError through: it must neither stop the publish
    # nor fail the pass, and /status must say what went wrong
    remote = ConfigRemote(tmp_path)
    remote.commit("sample", copy_from=SAMPLE)
    settings = settings_for(remote, tmp_path / "state", mosquitto.url, webhook_secret=SECRET, poll_s=3600)
    with responses.RequestsMock(assert_all_requests_are_fired=False) as mock:
        down = requests.ConnectionError("gitlab.example.test: connection refused")
        for method in (responses.GET, responses.POST, responses.PUT):
            mock.add(method, re.compile(rf"{re.escape(GITLAB)}/.*"), body=down)
        service = ConfigSync(settings, reporter=GitLabReporter(GITLAB, "glpat-test", "studio/phrame-config"))
        with serving(service) as url, reader(mosquitto.url) as client:
            running = Running(service, url, remote)
            running.idle()
            sha = remote.commit(
                "add", files={"environments/studio-a/services/asset-cache.yaml": SERVICE.format(tag=1)}
            )
            before = desired_on_broker(client)
            assert running.post("push.json", **{"Idempotency-Key": "gl-down"}).status_code == 202
            running.idle()
            after = desired_on_broker(client)
            assert without_sync(after) == carried(before, cli_render(remote.bare_path, sha))
            assert service.syncer.last["main"].commit == sha
            status = running.http.get("/status", headers={"Authorization": f"Bearer {SECRET}"}).json()
            running.http.close()
        assert status["workers"]["ref:main"]["failures"] == 0
        assert "GitLab unreachable: ConnectionError" in status["reports"]["last_error"]
        assert any("/statuses/" in str(c.request.url) for c in mock.calls)  # reporting was attempted


def test_merge_request_plan_previews_placement_with_the_nodes_config_sync_hears(
    gitlab_running: tuple[Running, CannedGitLab], mosquitto: Mosquitto
) -> None:
    """``mixer`` (label-placed, spread over role=edge) scaled 2 → 3 renders nothing for the third
    replica until placement commits node.json; the note previews the node placement would
    choose, with the liveness config-sync hears: edge-01, the only free edge node, is silent."""
    running, gitlab = gitlab_running
    topics = Topics()
    heard = ("core-01", "edge-02", "edge-03")
    with reader(mosquitto.url, "fake-agents") as agents:
        beats = [(topics.heartbeat(n), json.dumps(heartbeat(time.time())).encode()) for n in heard]
        agents.publish_batch(beats, retain=False)
        watch = running.service.view
        assert eventually(lambda: all(watch.verdict(n).is_online for n in heard))
    mixer = "environments/studio-a/services/mixer.yaml"
    text = (SAMPLE / mixer).read_text().replace("replicas: 2", "replicas: 3")
    running.remote.commit("three mixers", branch="feature/x", files={mixer: text})
    assert running.post("merge-request-open.json").status_code == 202
    running.idle()
    body = gitlab.notes[0]["body"]
    assert "#### Placement preview" in body and "(not online now: edge-01)" in body
    (row,) = [line for line in body.splitlines() if "`mixer.2`" in line]
    assert row.startswith("| studio-a | `mixer.2` | — | **unassigned** |") and "edge-01" in row, row


def test_merge_request_plan_flags_items_a_node_policy_refuses(
    gitlab_running: tuple[Running, CannedGitLab], mosquitto: Mosquitto
) -> None:
    """core-01's agent reports a policy allowing no host bind mount: the plan of a merge
    request names ``tams`` (it mounts /srv/tams and /etc/phrame/tams) and ``egress`` at their
    files' lines."""
    running, gitlab = gitlab_running
    status = {"state": "online", "agent": "0.1.0", "errors": []}
    status["policy"] = NodePolicy(file="/etc/phrame/policy.yaml").to_doc()
    topic = Topics().status("core-01")
    with reader(mosquitto.url, "fake-agent-policy") as agent:
        agent.publish_batch([(topic, json.dumps(status).encode())])
        try:
            view = running.service.view
            assert eventually(lambda: "policy" in (view.statuses().get("core-01") or {}))
            mixer = "environments/studio-a/services/mixer.yaml"
            text = (SAMPLE / mixer).read_text().replace("replicas: 2", "replicas: 3")
            running.remote.commit("three mixers", branch="feature/x", files={mixer: text})
            assert running.post("merge-request-open.json").status_code == 202
            running.idle()
        finally:
            agent.publish_batch([(topic, None)])  # the shared broker: no policy left for other tests
    body = gitlab.notes[0]["body"]
    assert "**3 item(s) refused by their node's own policy: the agent will not run them**" in body, body
    (row,) = [line for line in body.splitlines() if "tams.yaml:12:" in line]
    assert "studio-a.tams.0: bind mount of /srv/tams" in row and "not allowed on node core-01" in row, row
