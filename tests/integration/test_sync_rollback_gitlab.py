"""Rollback with GitLab: a branch ``rollback/<env>/<sha>`` committed through the commits API (on
the tracked head, with create/update/delete actions), a merge request, merged when asked and
GitLab allows; a refusal to merge is reported, not retried. GitLab is canned (its documented
shapes, over real HTTP); the trees come from a real git remote.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from config_sync.deploys.records import CONVERGED, DeployRecord
from config_sync.intake.clone import SyncRepo
from config_sync.reporting import GitLabReporter, LocalReporter
from config_sync.rollbacks.revert import RollbackRefused
from config_sync.rollbacks.runner import Rollbacks
from config_sync.service import ConfigSync
from phrame.gitlab import GitLabProject
from tests.integration.test_sync_deploy_records import egress_with
from tests.support.canned_gitlab import PROJECT, CannedGitLab
from tests.support.sync_support import SAMPLE, SECRET, ConfigRemote, settings_for

ENV = "studio-a"
EGRESS = "environments/studio-a/services/egress.yaml"
EXTRA = "environments/studio-a/services/extra.yaml"


@dataclass
class Tracking:
    owners: dict[str, str] = field(default_factory=lambda: {ENV: "main"})
    default_ref: str = "main"


@dataclass
class History:
    by_env: dict[str, list[DeployRecord]]


def _record(commit: str) -> DeployRecord:
    return DeployRecord(commit, "main", "Test Ops <ops@example.test>", "m", 1.0, state=CONVERGED)


def test_a_gitlab_rollback_opens_a_merge_request_and_merges_it_when_gitlab_allows(tmp_path: Path) -> None:
    remote = ConfigRemote(tmp_path)
    first = remote.commit("sample", copy_from=SAMPLE)
    second = remote.commit("egress: grace 40s, an extra file", files={**egress_with(40), EXTRA: "x: 1\n"})
    third = remote.commit("egress: grace 50s", files=egress_with(50))
    repo = SyncRepo(str(remote.bare_path), tmp_path / "state")
    history = History({ENV: [_record(third), _record(second), _record(first)]})
    canned = CannedGitLab(branches={"main": third}).start()
    try:
        gitlab = GitLabProject(canned.url, "glpat-test", PROJECT)
        rollbacks = Rollbacks(repo, Tracking(), history, tracks_at=lambda _: {}, gitlab=gitlab)

        done = rollbacks.roll_back(ENV, None, merge=True, who="carol")
        branch = f"rollback/{ENV}/{second[:12]}"
        assert (done.to, done.branch, done.mr_iid, done.merged) == (second, branch, 1, True)
        (commit,) = canned.calls("POST", "/repository/commits")
        body = commit["json"]
        assert (body["branch"], body["start_sha"]) == (branch, third)
        assert body["commit_message"].startswith(f"Roll back {ENV} to {second[:12]} (egress: grace 40s")
        (action,) = body["actions"]
        assert (action["action"], action["file_path"], action["encoding"]) == ("update", EGRESS, "base64")
        assert base64.b64decode(action["content"]) == egress_with(40)[EGRESS].encode()
        (opened,) = canned.calls("POST", "/merge_requests")
        assert (opened["json"]["source_branch"], opened["json"]["target_branch"]) == (branch, "main")
        assert opened["json"]["title"].startswith(f"Roll back {ENV} to {second[:12]}")
        assert len(canned.calls("PUT", "/merge_requests/1/merge")) == 1

        # to the first commit: the extra file goes (a delete action); GitLab refuses the merge
        canned.merge_refusal = (405, "405 Method Not Allowed")
        refused = rollbacks.roll_back(ENV, first[:9], merge=True)
        assert (refused.mr_iid, refused.merged) == (2, False)
        assert refused.merge_refused is not None and "405" in refused.merge_refused
        actions = canned.calls("POST", "/repository/commits")[-1]["json"]["actions"]
        assert {(a["action"], a["file_path"]) for a in actions} == {("update", EGRESS), ("delete", EXTRA)}
        assert len(canned.calls("PUT", "/merge_requests/2/merge")) == 1  # asked once, not retried

        # the same rollback again: the existing branch and its open merge request, nothing new
        again = rollbacks.roll_back(ENV, first)
        assert again.mr_iid == 2 and len(canned.calls("POST", "/repository/commits")) == 2
        assert len(canned.calls("POST", "/merge_requests")) == 2

        # an environment that tracks a tag is never rolled back by writing
        tagged = Rollbacks(
            repo, Tracking({ENV: "refs/tags/v1"}), history, tracks_at=lambda _: {}, gitlab=gitlab
        )
        with pytest.raises(RollbackRefused, match="tracks the tag v1") as e:
            tagged.roll_back(ENV, first)
        assert e.value.status == 409
    finally:
        canned.stop()


def test_config_sync_with_gitlab_rolls_back_through_its_gitlab_project(tmp_path: Path) -> None:
    remote = ConfigRemote(tmp_path)
    remote.commit("sample", copy_from=SAMPLE)
    settings = settings_for(remote, tmp_path / "state", "mqtt://127.0.0.1:1", webhook_secret=SECRET)
    reporter = GitLabReporter("http://127.0.0.1:9", "glpat-test", PROJECT)
    assert ConfigSync(settings, reporter=reporter).rollbacks.gitlab is reporter.gitlab  # never started
    assert ConfigSync(settings, reporter=LocalReporter()).rollbacks.gitlab is None  # pushes instead
