"""config_sync.deploys.gitlab_environments: what a record makes of its GitLab deployment,
with a recording stand-in for the adapter (the real one runs against a canned GitLab in
tests/integration/test_sync_gitlab_flow.py)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from config_sync.deploys.gitlab_environments import GitLabEnvironments, gitlab_status
from config_sync.deploys.records import DeployRecord
from phrame.gitlab import Deployment, GitLabRefused, GitLabUnavailable
from phrame.runtime import PermanentError, TemporaryError

SHA = "a" * 40


class Recorded:
    def __init__(self, existing: list[tuple[str, str, Deployment]] | None = None) -> None:
        self.existing = list(existing or [])  # (environment, sha, deployment)
        self.calls: list[tuple[Any, ...]] = []
        self.fail: Exception | None = None

    def find(self, environment: str, sha: str) -> Deployment | None:
        self.calls.append(("find", environment))
        if self.fail:
            raise self.fail
        return next((d for e, s, d in self.existing if (e, s) == (environment, sha)), None)

    def create(self, environment: str, sha: str, ref: str, status: str) -> Deployment:
        self.calls.append(("create", environment, ref, status))
        made = Deployment(len(self.existing) + 1, status)
        self.existing.append((environment, sha, made))
        return made

    def set_status(self, deployment_id: int, status: str) -> None:
        self.calls.append(("set", deployment_id, status))


def record(state: str = "pending") -> DeployRecord:
    return DeployRecord(SHA, "main", "ann", "msg", 1.0, {"n1": 1}, state=state)


@pytest.mark.parametrize(
    ("state", "status"),
    [("pending", "running"), ("converged", "success"), ("failed", "failed"), ("degraded", "failed"),
     ("superseded", "canceled")],
)  # fmt: skip
def test_a_records_state_is_its_deployments_status(state: str, status: str) -> None:
    assert gitlab_status(record(state)) == status


def test_created_running_then_moved_on_and_never_changed_once_finished() -> None:
    api = Recorded()
    envs = GitLabEnvironments(api)  # type: ignore[arg-type]
    envs.note("lab", record())
    envs.sync(("lab", SHA))
    envs.note("lab", replace(record(), state="converged"))
    envs.sync(("lab", SHA))
    envs.note("lab", replace(record(), state="superseded"))  # finished in GitLab: left as it is
    envs.sync(("lab", SHA))
    assert api.calls == [("find", "lab"), ("create", "lab", "main", "running"), ("set", 1, "success")]


def test_after_a_restart_the_deployment_made_before_is_found_not_made_again() -> None:
    api = Recorded([("lab", SHA, Deployment(7, "running"))])
    envs = GitLabEnvironments(api)  # type: ignore[arg-type]
    envs.note("lab", record("failed"))
    envs.sync(("lab", SHA))
    assert api.calls == [("find", "lab"), ("set", 7, "failed")]


def test_gitlab_away_is_retried_and_gitlab_refusing_is_not() -> None:
    api = Recorded()
    envs = GitLabEnvironments(api)  # type: ignore[arg-type]
    envs.note("lab", record())
    api.fail = GitLabUnavailable("no answer")
    with pytest.raises(TemporaryError):
        envs.sync(("lab", SHA))
    api.fail = GitLabRefused("403 Forbidden", status=403)
    with pytest.raises(PermanentError):
        envs.sync(("lab", SHA))
