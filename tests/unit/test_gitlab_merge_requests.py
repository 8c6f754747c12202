"""The merge requests of the GitLab adapter (phrame.gitlab), as placement's review mode and
the topic API's imports use them, against canned GitLab API responses (the `responses`
library; payloads shaped like GitLab's documented ones)."""

from __future__ import annotations

import json
from typing import Any

import pytest
import requests
import responses

from phrame.gitlab import (
    GitLabProject,
    GitLabRefused,
    GitLabUnavailable,
    MergeRequest,
    MergeRequests,
)

GITLAB = "https://gitlab.example.test"
MRS = f"{GITLAB}/api/v4/projects/broadcast%2Fphrame-config/merge_requests"
BRANCH = "placement/studio-a/0123abcd"


def mr(iid: int = 7, source: str = BRANCH) -> dict[str, Any]:
    return {
        "id": 1000 + iid,
        "iid": iid,
        "project_id": 42,
        "title": "placement studio-a: 2 replica moves",
        "state": "opened",
        "source_branch": source,
        "target_branch": "main",
        "web_url": f"{GITLAB}/broadcast/phrame-config/-/merge_requests/{iid}",
    }


def client() -> MergeRequests:
    return GitLabProject(GITLAB, "glpat-test", "broadcast/phrame-config").merge_requests


@responses.activate
def test_opens_a_merge_request_when_none_is_open() -> None:
    listing = responses.get(MRS, json=[])
    created = responses.post(MRS, json=mr(), status=201)
    got = client().ensure(BRANCH, "main", "placement studio-a: 2 replica moves", "body")
    assert got.iid == 7 and got.is_new and got.web_url.endswith("/merge_requests/7")
    assert listing.call_count == 1 and created.call_count == 1
    query = responses.calls[0].request.url or ""
    assert "state=opened" in query and "source_branch=placement%2Fstudio-a%2F0123abcd" in query
    assert responses.calls[0].request.headers["PRIVATE-TOKEN"] == "glpat-test"
    sent = json.loads(responses.calls[1].request.body or "{}")
    assert sent["source_branch"] == BRANCH and sent["target_branch"] == "main"
    assert sent["title"] == "placement studio-a: 2 replica moves"


@responses.activate
def test_an_open_merge_request_is_reused_never_a_second_one() -> None:
    responses.get(MRS, json=[mr(iid=9)])
    created = responses.post(MRS, json=mr(), status=201)
    got = client().ensure(BRANCH, "main", "t", "d")
    assert got.iid == 9 and not got.is_new
    assert created.call_count == 0


@responses.activate
def test_a_merge_request_from_another_branch_does_not_count() -> None:
    responses.get(MRS, json=[mr(iid=3, source="placement/studio-a/ffffffff")])
    created = responses.post(MRS, json=mr(iid=4), status=201)
    assert client().ensure(BRANCH, "main", "t", "d").iid == 4
    assert created.call_count == 1


@responses.activate
def test_conflict_on_create_returns_the_merge_request_someone_else_opened() -> None:
    responses.get(MRS, json=[])
    responses.post(
        MRS,
        status=409,
        json={"message": ["Another open merge request already exists for this source branch: !11"]},
    )
    responses.get(MRS, json=[mr(iid=11)])
    got = client().ensure(BRANCH, "main", "t", "d")
    assert got.iid == 11 and not got.is_new


@responses.activate
def test_api_errors_become_gitlab_errors() -> None:
    responses.get(MRS, status=401, json={"message": "401 Unauthorized"})
    with pytest.raises(GitLabRefused, match="cannot list merge requests") as caught:
        client().ensure(BRANCH, "main", "t", "d")
    assert caught.value.status == 401  # permanent: the token, not a retry, fixes it


@responses.activate
def test_unreachable_gitlab_becomes_a_gitlab_error() -> None:
    # python-gitlab passes requests' own errors through unwrapped
    responses.get(MRS, body=requests.ConnectionError("connection refused"))
    with pytest.raises(GitLabUnavailable, match=r"cannot list merge requests.*connection refused"):
        client().ensure(BRANCH, "main", "t", "d")
    responses.replace(responses.GET, MRS, json=[])
    responses.post(MRS, body=requests.Timeout("read timed out"))
    with pytest.raises(GitLabUnavailable, match=r"cannot open a merge request.*read timed out"):
        client().ensure(BRANCH, "main", "t", "d")


@responses.activate
def test_close_superseded_closes_only_older_proposals_of_the_same_environment() -> None:
    older = mr(iid=3, source="placement/studio-a/ffffffff")
    others = [mr(iid=4, source="placement/studio-b/ffffffff"), mr(iid=5, source="feature/studio-a")]
    listing = responses.get(MRS, json=[mr(iid=7), older, *others])
    closing = responses.put(f"{MRS}/3", json={**older, "state": "closed"})
    assert client().close_superseded(BRANCH) == [3]
    assert "state=opened" in (listing.calls[0].request.url or "")
    assert closing.call_count == 1
    assert json.loads(closing.calls[0].request.body or "{}") == {"state_event": "close"}


@responses.activate
def test_close_superseded_failure_is_a_gitlab_error() -> None:
    responses.get(MRS, json=[mr(iid=3, source="placement/studio-a/ffffffff")])
    responses.put(f"{MRS}/3", status=403, json={"message": "403 Forbidden"})
    with pytest.raises(GitLabRefused, match="cannot close the merge requests"):
        client().close_superseded(BRANCH)


@responses.activate
def test_open_always_opens_and_never_targets_a_tag() -> None:
    created = responses.post(MRS, json=mr(iid=12), status=201)
    got = client().open("phrame-import/studio-a-1", "refs/heads/main", "import", "files")
    assert got == MergeRequest(12, f"{GITLAB}/broadcast/phrame-config/-/merge_requests/12", is_new=True)
    sent = json.loads(created.calls[0].request.body or "{}")
    assert sent["target_branch"] == "main" and sent["remove_source_branch"] is True
    with pytest.raises(GitLabRefused, match="is a tag"):
        client().open("phrame-import/studio-a-2", "refs/tags/v1", "import", "files")
    assert created.call_count == 1  # refused before any request
