"""Who approved the merge request that merged a commit (phrame.gitlab's approvals), against
canned GitLab answers shaped as GitLab documents them (`responses`)."""

from __future__ import annotations

import pytest
import responses

from phrame.gitlab import GitLabProject, GitLabUnavailable
from tests.support.canned_gitlab import approvals_doc, merged_mr_doc

GITLAB = "https://gitlab.example.test"
BASE = f"{GITLAB}/api/v4/projects/studio%2Fphrame-config"
SHA = "c" * 40


def client() -> GitLabProject:
    return GitLabProject(GITLAB, "glpat-test", "studio/phrame-config")


@responses.activate
def test_the_merged_merge_request_into_the_branch_and_its_approvers() -> None:
    other = {**merged_mr_doc(3, "release", SHA)}
    opened = {**merged_mr_doc(5, "main", SHA), "state": "opened"}
    responses.get(
        f"{BASE}/repository/commits/{SHA}/merge_requests",
        json=[other, opened, merged_mr_doc(12, "main", SHA)],
    )
    asked = responses.get(f"{BASE}/merge_requests/12/approvals", json=approvals_doc(12, ["alice", "bob"]))
    found = client().approvals.of_commit(SHA, "refs/heads/main")
    assert found is not None and found.iid == 12 and found.web_url.endswith("/merge_requests/12")
    assert [a.username for a in found.approvers] == ["alice", "bob"] and found.approvers[0].name == "Alice"
    assert asked.call_count == 1


@responses.activate
def test_a_direct_push_has_no_merge_request() -> None:
    responses.get(f"{BASE}/repository/commits/{SHA}/merge_requests", json=[])
    assert client().approvals.of_commit(SHA, "main") is None


@responses.activate
@pytest.mark.parametrize("status", [502, 503, 429])
def test_an_outage_is_unavailable_not_no_approval(status: int) -> None:
    responses.get(f"{BASE}/repository/commits/{SHA}/merge_requests", json=[merged_mr_doc(12, "main", SHA)])
    responses.get(f"{BASE}/merge_requests/12/approvals", json={"message": "down"}, status=status)
    with pytest.raises(GitLabUnavailable):
        client().approvals.of_commit(SHA, "main")
