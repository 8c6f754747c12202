"""The GitLab adapter's review environments and merge-request approvals (phrame.gitlab),
against canned GitLab answers shaped as GitLab's Environments and Merge request approvals
API documents them (the ``responses`` library)."""

from __future__ import annotations

import json

import responses

from config_sync.previews.gitlab_review import GitLabReviewApps
from phrame.gitlab import GitLabProject

GITLAB = "https://gitlab.example.test"
PROJECT = f"{GITLAB}/api/v4/projects/broadcast%2Fphrame-config"
ENVS = f"{PROJECT}/environments"
NAME = "review/studio-a-mr-7"
SHA = "a" * 40


def env_doc(ident: int = 31, state: str = "available") -> dict[str, object]:
    return {"id": ident, "name": NAME, "slug": "review-studio-a-mr-7-x1y2z3", "external_url": None,
            "state": state, "tier": "development", "auto_stop_setting": "always"}  # fmt: skip


def project() -> GitLabProject:
    return GitLabProject(GITLAB, "glpat-test", "broadcast/phrame-config")


@responses.activate
def test_a_review_environment_is_made_once_with_a_deployment_and_linked() -> None:
    listing = responses.get(ENVS, json=[])
    made = responses.post(ENVS, json=env_doc(), status=201)
    responses.get(f"{PROJECT}/deployments", json=[])
    deployed = responses.post(
        f"{PROJECT}/deployments", json={"id": 5, "status": "success", "sha": SHA}, status=201
    )
    url = GitLabReviewApps(project()).started("studio-a-mr-7", SHA, "feature/x")
    assert url == f"{GITLAB}/broadcast/phrame-config/-/environments/31"
    assert "name=review%2Fstudio-a-mr-7" in (listing.calls[0].request.url or "")
    sent = json.loads(made.calls[0].request.body or "{}")
    assert sent == {"name": NAME, "tier": "development", "auto_stop_setting": "always"}
    deployment = json.loads(deployed.calls[0].request.body or "{}")
    assert deployment == {
        "environment": NAME,
        "sha": SHA,
        "ref": "feature/x",
        "tag": False,
        "status": "success",
    }
    # the next head: the environment is found, not made again
    responses.get(ENVS, json=[env_doc()])
    assert GitLabReviewApps(project()).started("studio-a-mr-7", "b" * 40, "feature/x") is not None
    assert made.call_count == 1 and deployed.call_count == 2


@responses.activate
def test_stopping_posts_stop_once_and_a_stopped_or_missing_one_is_left() -> None:
    responses.get(ENVS, json=[env_doc()])
    stop = responses.post(f"{ENVS}/31/stop", json=env_doc(state="stopping"))
    GitLabReviewApps(project()).stopped("studio-a-mr-7")
    assert stop.call_count == 1
    responses.replace(responses.GET, ENVS, json=[env_doc(state="stopped")])
    GitLabReviewApps(project()).stopped("studio-a-mr-7")
    responses.replace(responses.GET, ENVS, json=[])
    GitLabReviewApps(project()).stopped("studio-a-mr-7")
    assert stop.call_count == 1


@responses.activate
def test_approvals_count_the_approvers_and_gitlab_away_counts_none() -> None:
    approvals = f"{PROJECT}/merge_requests/7/approvals"
    responses.get(approvals, json={"id": 1007, "iid": 7, "project_id": 42, "approved": True,
                                   "approvals_required": 0, "approvals_left": 0,
                                   "approved_by": [{"user": {"id": 3, "username": "ada", "name": "Ada Ops"}}]})  # fmt: skip
    assert GitLabReviewApps(project()).approvals(7) == 1
    responses.replace(responses.GET, approvals, json={"message": "502 Bad Gateway"}, status=502)
    assert GitLabReviewApps(project()).approvals(7) == 0
