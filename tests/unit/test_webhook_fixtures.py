"""Checks the recorded GitLab webhook deliveries in fixtures/webhooks/.

Config-sync tests and `phrame replay EVENT.json` post these files; this test pins the
properties the webhook handler relies on (headers, refs, shas, MR fields) and that the
files tell one consistent history. It reads files only; it never talks to a network.
"""

from __future__ import annotations

import json
import re
import uuid
from pathlib import Path
from typing import Any

import pytest

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "webhooks"
ZERO_SHA = "0" * 40
SHA_RE = re.compile(r"^[0-9a-f]{40}$")
SHA_KEYS = {"before", "after", "checkout_sha", "oldrev", "merge_commit_sha"}
KIND_BY_EVENT = {
    "Push Hook": "push",
    "Tag Push Hook": "tag_push",
    "Merge Request Hook": "merge_request",
}
PUSHES = [
    "push.json",
    "push-branch-create.json",
    "push-branch-delete.json",
    "push-many-commits.json",
]
MERGE_REQUESTS = {
    "merge-request-open.json": ("open", "opened"),
    "merge-request-update.json": ("update", "opened"),
    "merge-request-merge.json": ("merge", "merged"),
    "merge-request-close.json": ("close", "closed"),
}
ALL = [*PUSHES, "tag-push.json", *MERGE_REQUESTS]


def load(name: str) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads((FIXTURES / name).read_text(encoding="utf-8"))
    return doc


def shas(node: Any) -> list[str]:
    """Every commit id in a payload: the SHA_KEYS fields and each `id` of a commit object."""
    found: list[str] = []
    if isinstance(node, dict):
        is_commit = "/commit/" in str(node.get("url", ""))
        for key, value in node.items():
            if (key in SHA_KEYS and value is not None) or (key == "id" and is_commit):
                found.append(value)
            else:
                found.extend(shas(value))
    elif isinstance(node, list):
        for item in node:
            found.extend(shas(item))
    return found


def test_directory_holds_exactly_the_documented_deliveries() -> None:
    assert sorted(p.name for p in FIXTURES.glob("*.json")) == sorted(ALL)


@pytest.mark.parametrize("name", ALL)
def test_delivery_headers_match_the_body(name: str) -> None:
    doc = load(name)
    assert set(doc) == {"headers", "body"}
    headers, body = doc["headers"], doc["body"]
    assert KIND_BY_EVENT[headers["X-Gitlab-Event"]] == body["object_kind"]
    assert headers["Content-Type"] == "application/json"
    assert headers["X-Gitlab-Token"] == "phrame-test-secret"
    assert headers["User-Agent"].startswith("GitLab/")
    assert headers["X-Gitlab-Instance"] == "http://gitlab.example.test"
    for key in ("Idempotency-Key", "X-Gitlab-Event-UUID", "X-Gitlab-Webhook-UUID"):
        assert str(uuid.UUID(headers[key])) == headers[key]
    project = body["project"]
    assert (project["id"], project["path_with_namespace"], project["default_branch"]) == (
        42,
        "studio/phrame-config",
        "main",
    )
    found = shas(body)
    assert found and all(SHA_RE.match(s) for s in found), found


def test_idempotency_keys_and_event_uuids_are_distinct() -> None:
    for key in ("Idempotency-Key", "X-Gitlab-Event-UUID"):
        values = [load(name)["headers"][key] for name in ALL]
        assert len(set(values)) == len(ALL), key


@pytest.mark.parametrize("name", PUSHES)
def test_push_commits_are_newest_last_and_capped_at_20(name: str) -> None:
    body = load(name)["body"]
    assert body["ref"].startswith("refs/heads/")
    commits = body["commits"]
    assert len(commits) == min(body["total_commits_count"], 20)
    if commits:
        assert commits[-1]["id"] == body["after"] == body["checkout_sha"]


def test_push_to_main_touches_the_environment_tree() -> None:
    body = load("push.json")["body"]
    assert body["ref"] == "refs/heads/main" and body["total_commits_count"] == 2
    paths = [p for c in body["commits"] for k in ("added", "modified", "removed") for p in c[k]]
    assert all(p.startswith("environments/studio-a/") for p in paths)
    assert {k for c in body["commits"] for k in ("added", "modified", "removed") if c[k]} == {
        "added",
        "modified",
        "removed",
    }


def test_branch_create_and_delete() -> None:
    create = load("push-branch-create.json")["body"]
    assert create["before"] == ZERO_SHA and create["ref"] == "refs/heads/feature/x"
    delete = load("push-branch-delete.json")["body"]
    assert delete["after"] == ZERO_SHA and delete["checkout_sha"] is None
    assert delete["commits"] == [] and delete["total_commits_count"] == 0


def test_many_commits_payload_is_truncated_like_gitlab() -> None:
    body = load("push-many-commits.json")["body"]
    assert body["total_commits_count"] == 27 > len(body["commits"]) == 20


def test_tag_push() -> None:
    doc = load("tag-push.json")
    assert doc["headers"]["X-Gitlab-Event"] == "Tag Push Hook"
    body = doc["body"]
    assert (body["object_kind"], body["event_name"], body["ref"]) == (
        "tag_push",
        "tag_push",
        "refs/tags/v1.0.0",
    )
    assert body["before"] == ZERO_SHA and SHA_RE.match(body["checkout_sha"])


@pytest.mark.parametrize(("name", "expected"), MERGE_REQUESTS.items())
def test_merge_request_fields(name: str, expected: tuple[str, str]) -> None:
    body = load(name)["body"]
    attrs = body["object_attributes"]
    assert body["event_type"] == "merge_request"
    assert (attrs["action"], attrs["state"]) == expected
    assert (attrs["iid"], attrs["source_branch"], attrs["target_branch"]) == (
        7,
        "feature/x",
        "main",
    )
    assert SHA_RE.match(attrs["last_commit"]["id"])
    assert isinstance(body["changes"], dict) and "merge_status" in attrs
    assert ("oldrev" in attrs) == (attrs["action"] == "update")


def test_files_describe_one_history() -> None:
    created = load("push-branch-create.json")["body"]
    opened = load("merge-request-open.json")["body"]["object_attributes"]
    updated = load("merge-request-update.json")["body"]["object_attributes"]
    merged = load("merge-request-merge.json")["body"]["object_attributes"]
    closed = load("merge-request-close.json")["body"]["object_attributes"]
    deleted = load("push-branch-delete.json")["body"]
    assert opened["last_commit"]["id"] == created["after"] == updated["oldrev"]
    head = updated["last_commit"]["id"]
    assert head != updated["oldrev"]
    assert merged["last_commit"]["id"] == closed["last_commit"]["id"] == deleted["before"] == head
    assert load("push-many-commits.json")["body"]["before"] == merged["merge_commit_sha"]
    assert load("tag-push.json")["body"]["after"] == load("push-many-commits.json")["body"]["after"]
