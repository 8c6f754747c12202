"""Previews with GitLab: python-gitlab against a canned GitLab (``responses``, shaped as
GitLab's Environments, Deployments and Merge request approvals APIs document them), webhooks
over real HTTP to the real app, a real git remote and mosquitto behind it. A fork's merge
request waits for an approval; approved, its preview is GitLab environment
``review/studio-a-mr-7`` with a deployment, linked from the note; a close stops it."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
import responses

from config_sync.reporting import GitLabReporter
from config_sync.service import ConfigSync
from schemas.registry import check_payload
from tests.integration.test_sync_app import Running, delivery, serving
from tests.integration.test_sync_gitlab_flow import GITLAB, JSON, PROJECT, CannedGitLab
from tests.support.mosquitto import Mosquitto
from tests.support.sync_support import SAMPLE, SECRET, ConfigRemote, desired_on_broker, reader, settings_for

ENV_YAML = "environments/studio-a/environment.yaml"
PREVIEW = "preview:\n  nodes: {node: core-01}\n  services: [mixer]\n"
MIXER = "environments/studio-a/services/mixer.yaml"
NAME = "review/studio-a-mr-7"


class CannedReviewApps(CannedGitLab):
    """Adds Environments (list by name, create, stop) and one MR's approvals."""

    def __init__(self, mock: responses.RequestsMock) -> None:
        super().__init__(mock)
        self.environments: list[dict[str, Any]] = []
        self.approved_by: list[dict[str, Any]] = []
        self.stops: list[int] = []
        envs = re.compile(rf"{re.escape(PROJECT)}/environments")
        mock.add_callback(responses.GET, re.compile(rf"{envs.pattern}(\?.*)?$"), self.list_environments)
        mock.add_callback(responses.POST, re.compile(rf"{envs.pattern}$"), self.create_environment)
        mock.add_callback(responses.POST, re.compile(rf"{envs.pattern}/(\d+)/stop$"), self.stop_environment)
        approvals = f"{PROJECT}/merge_requests/7/approvals"
        mock.add_callback(responses.GET, approvals, self.approvals)

    def list_environments(self, request: Any) -> tuple[int, dict[str, str], str]:
        name = parse_qs(urlsplit(request.url).query).get("name", [None])[0]
        return 200, JSON, json.dumps([e for e in self.environments if name in (None, e["name"])])

    def create_environment(self, request: Any) -> tuple[int, dict[str, str], str]:
        body = json.loads(request.body)
        doc = {"id": 30 + len(self.environments), "name": body["name"], "slug": "review-studio-a-mr-7-a1b2c3",
               "external_url": body.get("external_url"), "state": "available", "tier": body.get("tier"),
               "auto_stop_setting": body.get("auto_stop_setting", "with_action"), "sent": body}  # fmt: skip
        self.environments.append(doc)
        return 201, JSON, json.dumps(doc)

    def stop_environment(self, request: Any) -> tuple[int, dict[str, str], str]:
        ident = int(request.url.rsplit("/", 2)[-2])
        env = next(e for e in self.environments if e["id"] == ident)
        env["state"] = "stopped"
        self.stops.append(ident)
        return 200, JSON, json.dumps(env)

    def approvals(self, _request: Any) -> tuple[int, dict[str, str], str]:
        doc = {"id": 1007, "iid": 7, "project_id": 42, "approved": bool(self.approved_by),
               "approvals_required": 0, "approvals_left": 0, "approved_by": self.approved_by}  # fmt: skip
        return 200, JSON, json.dumps(doc)


@pytest.fixture
def gitlab_previews(tmp_path: Path, mosquitto: Mosquitto) -> Iterator[tuple[Running, CannedReviewApps]]:
    remote = ConfigRemote(tmp_path)
    remote.commit("sample", copy_from=SAMPLE)
    remote.commit("previews", files={ENV_YAML: (SAMPLE / ENV_YAML).read_text() + PREVIEW})
    settings = settings_for(remote, tmp_path / "state", mosquitto.url, webhook_secret=SECRET, poll_s=3600)
    with responses.RequestsMock(assert_all_requests_are_fired=False) as mock:
        mock.add_passthru("http://127.0.0.1")
        gitlab = CannedReviewApps(mock)
        reporter = GitLabReporter(GITLAB, "glpat-test", "studio/phrame-config")
        service = ConfigSync(settings, reporter=reporter)
        with serving(service) as url:
            running = Running(service, url, remote)
            running.idle()
            yield running, gitlab
            running.http.close()


def post_fork(running: Running, name: str, key: str) -> int:
    headers, raw = delivery(name, **{"Idempotency-Key": key})
    body = json.loads(raw)
    body["object_attributes"]["source_project_id"] = 99  # a fork of project 42
    return running.http.post("/webhooks/gitlab", content=json.dumps(body), headers=headers).status_code


def preview_items(client: Any) -> list[str]:
    return [t for t, v in desired_on_broker(client).items() if "/studio-a-mr-7." in t and v]


@pytest.mark.slow
def test_a_forks_preview_waits_for_an_approval_then_is_a_gitlab_review_environment_until_closed(
    gitlab_previews: tuple[Running, CannedReviewApps], mosquitto: Mosquitto
) -> None:
    running, gitlab = gitlab_previews
    running.remote.work.git.checkout("-b", "feature/x")
    mixer = (SAMPLE / MIXER).read_text().replace("env:\n", "env:\n  CHANGE: one\n", 1)
    head = running.remote.commit("change the mixer", branch="feature/x", files={MIXER: mixer})
    assert post_fork(running, "merge-request-open.json", "fork-1") == 202
    running.idle()
    record = running.service.previews.records["studio-a-mr-7"]
    assert record["state"] == "waiting-approval" and record["fork"] is True
    assert "once the merge request has an approval in GitLab" in gitlab.notes[0]["body"]
    assert gitlab.environments == []
    with reader(mosquitto.url) as client:
        assert preview_items(client) == []

    gitlab.approved_by = [{"user": {"id": 3, "username": "ada", "name": "Ada Ops"}}]
    assert post_fork(running, "merge-request-update.json", "fork-2") == 202
    running.idle()
    record = running.service.previews.records["studio-a-mr-7"]
    assert (record["state"], record["commit"]) == ("deployed", head)
    check_payload("desired-preview", record)
    with reader(mosquitto.url) as client:
        assert sorted(t.rsplit("/", 1)[1] for t in preview_items(client) if "/containers/" in t) == [
            "studio-a-mr-7.input-proc.0",
            "studio-a-mr-7.mixer.0",
        ]
    [env] = gitlab.environments
    assert env["name"] == NAME and env["sent"] == {
        "name": NAME,
        "tier": "development",
        "auto_stop_setting": "always",
    }
    review = [d for d in gitlab.deployments if d["environment"]["name"] == NAME]
    assert [(d["sha"], d["ref"], d["status"]) for d in review] == [(head, "feature/x", "success")]
    link = f"[GitLab environment {NAME}]({GITLAB}/studio/phrame-config/-/environments/{env['id']})"
    assert link in gitlab.notes[0]["body"] and len(gitlab.notes) == 1

    assert running.post("merge-request-close.json").status_code == 202
    running.idle()
    assert gitlab.stops == [env["id"]] and running.service.previews.records == {}
    with reader(mosquitto.url) as client:
        assert preview_items(client) == []
