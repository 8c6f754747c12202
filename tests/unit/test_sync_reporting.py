"""config-sync's GitLab reporter (config_sync.reporting over phrame.gitlab) against canned
GitLab REST responses (the `responses` library): statuses, the one plan note, and what it
keeps for /status.

Shapes follow GitLab's API docs (Commits › Set the pipeline status of a commit, Notes ›
Merge requests); the request bodies are asserted.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
import requests
import responses

from config_sync.reporting import GitLabReporter
from config_sync.review_note import REVIEW_NOTE_MARKER
from phrame.gitlab import GitLabError

GITLAB = "http://gitlab.example.test"
PROJECT = f"{GITLAB}/api/v4/projects/studio%2Fphrame-config"
SHA = "940bc1e6d4b723e038c6b4d6ebae97dc84b569de"
NOTES = f"{PROJECT}/merge_requests/7/notes"


@pytest.fixture
def api() -> Iterator[responses.RequestsMock]:
    with responses.RequestsMock(assert_all_requests_are_fired=True) as mock:
        yield mock


@pytest.fixture
def reporter() -> GitLabReporter:
    return GitLabReporter(GITLAB, "glpat-test-token", "studio/phrame-config")


def status_doc(state: str, name: str) -> dict[str, Any]:
    return {
        "id": 93,
        "sha": SHA,
        "ref": "main",
        "status": state,
        "name": name,
        "description": "valid",
        "target_url": None,
        "allow_failure": False,
        "author": {"id": 7, "username": "phrame-bot"},
    }


def body_of(call: Any) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(call.request.body)
    return doc


def test_status_posts_state_name_description_and_ref(
    api: responses.RequestsMock, reporter: GitLabReporter
) -> None:
    api.post(f"{PROJECT}/statuses/{SHA}", json=status_doc("success", "phrame/validate"), status=201)
    reporter.set_status(SHA, "phrame/validate", "success", "valid", ref="main")
    call = api.calls[0]
    assert body_of(call) == {
        "state": "success",
        "name": "phrame/validate",
        "description": "valid",
        "ref": "main",
    }
    assert call.request.headers["PRIVATE-TOKEN"] == "glpat-test-token"
    reporter.set_status(SHA, "phrame/validate", "success", "valid", ref="main")  # repeat: no request
    assert len(api.calls) == 1


def test_a_status_for_a_tracked_tag_names_the_tag_as_gitlab_does(
    api: responses.RequestsMock, reporter: GitLabReporter
) -> None:
    # GitLab's `ref` is a branch or tag name ("v1"), not the full ref config-sync tracks
    api.post(f"{PROJECT}/statuses/{SHA}", json=status_doc("success", "phrame/validate"), status=201)
    reporter.set_status(SHA, "phrame/validate", "success", "valid", ref="refs/tags/v1")
    assert body_of(api.calls[0])["ref"] == "v1"


def test_repeated_transition_400_counts_as_success(
    api: responses.RequestsMock, reporter: GitLabReporter
) -> None:
    message = (
        'Cannot transition status via :run from :running (Reason(s): Status cannot transition via "run")'
    )
    api.post(f"{PROJECT}/statuses/{SHA}", json={"message": message}, status=400)
    reporter.set_status(SHA, "phrame/deploy", "running", "waiting for edge-01")
    assert body_of(api.calls[0])["state"] == "running"
    assert reporter.snapshot()["statuses"][-1]["state"] == "running"


def test_other_errors_raise_with_the_reason(api: responses.RequestsMock, reporter: GitLabReporter) -> None:
    api.post(f"{PROJECT}/statuses/{SHA}", json={"message": "403 Forbidden"}, status=403)
    with pytest.raises(GitLabError, match="403"):
        reporter.set_status(SHA, "phrame/validate", "failed", "2 problem(s)")
    with pytest.raises(ValueError, match="unknown commit status"):
        reporter.set_status(SHA, "phrame/validate", "broken", "x")


def note(note_id: int, body: str) -> dict[str, Any]:
    return {
        "id": note_id,
        "body": body,
        "author": {"id": 1, "username": "someone"},
        "system": False,
        "noteable_id": 1207,
        "noteable_type": "MergeRequest",
        "noteable_iid": 7,
        "created_at": "2026-11-21T10:06:00Z",
        "updated_at": "2026-11-21T10:06:00Z",
    }


def test_open_then_update_upserts_one_note(api: responses.RequestsMock, reporter: GitLabReporter) -> None:
    first = f"{REVIEW_NOTE_MARKER}\n### Phrame plan\n1 to add"
    second = f"{REVIEW_NOTE_MARKER}\n### Phrame plan\n2 to add"
    # MR opened: only a human comment exists -> create
    api.get(NOTES, json=[note(1, "LGTM?")])
    api.post(NOTES, json=note(2, first), status=201)
    reporter.upsert_review_note(7, first)
    assert body_of(api.calls[1]) == {"body": first}
    # MR updated: the plan note is found by its marker and edited in place
    api.get(NOTES, json=[note(1, "LGTM?"), note(2, first)])
    api.put(f"{NOTES}/2", json=note(2, second))
    reporter.upsert_review_note(7, second)
    assert body_of(api.calls[3]) == {"body": second}
    # the same plan again: found, unchanged, nothing written
    api.get(NOTES, json=[note(1, "LGTM?"), note(2, second)])
    reporter.upsert_review_note(7, second)
    methods = [c.request.method for c in api.calls]
    assert methods == ["GET", "POST", "GET", "PUT", "GET"]
    assert methods.count("POST") == 1


def test_unreachable_gitlab_becomes_gitlab_error_and_is_kept_for_status(
    api: responses.RequestsMock, reporter: GitLabReporter
) -> None:
    # python-gitlab passes requests' own errors through: the adapter must convert them
    api.post(f"{PROJECT}/statuses/{SHA}", body=requests.ConnectionError("connection refused"))
    api.get(NOTES, body=requests.Timeout("read timed out"))
    with pytest.raises(GitLabError, match="GitLab unreachable: ConnectionError"):
        reporter.set_status(SHA, "phrame/validate", "success", "valid", ref="main")
    assert reporter.snapshot()["last_error"].startswith("status phrame/validate=success")
    assert reporter.snapshot()["statuses"] == []  # not remembered: the next pass sets it again
    with pytest.raises(GitLabError, match="GitLab unreachable: Timeout"):
        reporter.upsert_review_note(7, "plan")
