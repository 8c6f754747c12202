"""The GitLab adapter's project calls (phrame.gitlab.GitLabProject) against canned GitLab REST
responses (the `responses` library): commit statuses, branches from an explicit sha, commits
with ``start_sha`` / ``last_commit_id``, and no write ever aimed at a tag.

Shapes follow GitLab's API docs (Commits › Set the pipeline status of a commit, Branches ›
Get single repository branch / Create repository branch, Commits › Create a commit with
multiple files and actions); the request bodies are asserted.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
import requests
import responses

from phrame.gitlab import GitLabProject, GitLabRefused, GitLabUnavailable
from tests.support.canned_gitlab import branch_doc, commit_doc

GITLAB = "http://gitlab.example.test"
PROJECT = f"{GITLAB}/api/v4/projects/studio%2Fphrame-config"
SHA = "940bc1e6d4b723e038c6b4d6ebae97dc84b569de"


@pytest.fixture
def api() -> Iterator[responses.RequestsMock]:
    with responses.RequestsMock(assert_all_requests_are_fired=True) as mock:
        yield mock


@pytest.fixture
def project() -> GitLabProject:
    return GitLabProject(GITLAB, "glpat-test-token", "studio/phrame-config")


def body_of(call: Any) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(call.request.body)
    return doc


def test_a_repeated_transition_is_success_other_answers_keep_their_kind(
    api: responses.RequestsMock, project: GitLabProject
) -> None:
    statuses = f"{PROJECT}/statuses/{SHA}"
    api.post(statuses, json={"message": "Cannot transition status via :run from :running"}, status=400)
    project.set_status(SHA, "phrame/deploy", "running", "x" * 300, ref="refs/tags/v1")
    assert body_of(api.calls[0]) == {
        "state": "running",
        "name": "phrame/deploy",
        "description": "x" * 255,  # GitLab's limit
        "ref": "v1",
    }
    api.post(statuses, json={"message": "403 Forbidden"}, status=403)
    with pytest.raises(GitLabRefused, match=r"set status phrame/deploy=failed on 940bc1e6d4b7 .*403") as no:
        project.set_status(SHA, "phrame/deploy", "failed", "x")
    assert no.value.status == 403 and no.value.reason.endswith("Forbidden")
    api.post(statuses, json={"message": "500 Internal Server Error"}, status=500)
    with pytest.raises(GitLabUnavailable, match="500"):
        project.set_status(SHA, "phrame/deploy", "failed", "x")


def test_branch_head_and_files_read_none_for_absent(
    api: responses.RequestsMock, project: GitLabProject
) -> None:
    api.get(f"{PROJECT}/repository/branches/main", json=branch_doc("main", SHA))
    api.get(f"{PROJECT}/repository/branches/gone", json={"message": "404 Branch Not Found"}, status=404)
    api.get(f"{PROJECT}/repository/tree", json={"message": "404 Tree Not Found"}, status=404)
    assert project.branch_head("main") == SHA
    assert project.branch_head("gone") is None
    assert project.files_under("environments/studio-a", SHA) == set()


def test_a_branch_starts_from_an_explicit_sha_never_a_tag(
    api: responses.RequestsMock, project: GitLabProject
) -> None:
    created = api.post(f"{PROJECT}/repository/branches", json=branch_doc("review/x", SHA), status=201)
    project.create_branch("refs/heads/review/x", SHA)
    assert body_of(created.calls[0]) == {"branch": "review/x", "ref": SHA}
    with pytest.raises(ValueError, match="full commit sha"):
        project.create_branch("review/y", "main")  # a ref may move between read and write
    with pytest.raises(GitLabRefused, match="is a tag"):
        project.create_branch("refs/tags/v2", SHA)
    assert created.call_count == 1


def test_commits_name_start_sha_or_last_commit_id(
    api: responses.RequestsMock, project: GitLabProject
) -> None:
    commits = api.post(f"{PROJECT}/repository/commits", json=commit_doc("a" * 40, "m", SHA), status=201)
    files = [
        {"action": "create", "file_path": "a.yaml", "content": "a"},
        {"action": "update", "file_path": "b.yaml", "content": "b"},
    ]
    assert project.create_commit("import/x", "m", files, start_sha=SHA) == "a" * 40
    assert body_of(commits.calls[0]) == {
        "branch": "import/x",
        "commit_message": "m",
        "start_sha": SHA,
        "actions": files,
    }
    project.create_commit("main", "m", files, last_commit_id=SHA)
    sent = body_of(commits.calls[1])
    assert "start_sha" not in sent and sent["branch"] == "main"
    assert [a.get("last_commit_id") for a in sent["actions"]] == [None, SHA]  # GitLab checks updates
    with pytest.raises(ValueError, match="exactly one"):
        project.create_commit("main", "m", files)
    with pytest.raises(GitLabRefused, match="is a tag"):
        project.create_commit("refs/tags/v1", "m", files, start_sha=SHA)
    assert commits.call_count == 2


def test_unreachable_gitlab_is_transient(api: responses.RequestsMock, project: GitLabProject) -> None:
    # python-gitlab passes requests' own errors through: the adapter converts them
    api.get(f"{PROJECT}/repository/branches/main", body=requests.ConnectionError("connection refused"))
    with pytest.raises(
        GitLabUnavailable, match=r"read branch main .*GitLab unreachable: ConnectionError"
    ) as e:
        project.branch_head("main")
    assert e.value.status is None
