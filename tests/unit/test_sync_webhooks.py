"""Routing of the recorded GitLab deliveries (fixtures/webhooks) by config_sync.intake.webhooks."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from config_sync.intake.webhooks import MalformedEvent, delivery_key, is_token_valid, parse_body, route

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "webhooks"
TRACKED = {"main"}


def delivery(name: str) -> tuple[str, dict[str, Any]]:
    doc = json.loads((FIXTURES / name).read_text())
    return doc["headers"]["X-Gitlab-Event"], doc["body"]


def test_push_to_tracked_branch_syncs_the_branch_not_the_sha() -> None:
    r = route(*delivery("push.json"), TRACKED)
    assert (r.action, r.ref) == ("sync", "main")


def test_push_to_untracked_branch_is_ignored() -> None:
    r = route(*delivery("push-branch-create.json"), TRACKED)
    assert r.action == "ignore" and "feature/x" in r.reason


def test_branch_delete_of_tracked_branch_keeps_the_last_state() -> None:
    event, body = delivery("push-branch-delete.json")
    assert route(event, body, {"feature/x"}).action == "ignore"
    assert "deleted" in route(event, body, {"feature/x"}).reason


def test_tag_push_of_an_untracked_tag_is_ignored() -> None:
    r = route(*delivery("tag-push.json"), TRACKED)
    assert r.action == "ignore" and "v1.0.0" in r.reason


def test_tag_push_of_a_tracked_tag_syncs_that_tag() -> None:
    event, body = delivery("tag-push.json")
    r = route(event, body, {"main", "refs/tags/v1.0.0"})
    assert (r.action, r.ref, r.sha) == ("sync", "refs/tags/v1.0.0", body["checkout_sha"])


def test_deleting_a_tracked_tag_syncs_it_so_the_loss_is_reported() -> None:
    event, body = delivery("tag-push.json")
    gone = {**body, "before": body["after"], "after": "0" * 40, "checkout_sha": None}
    r = route(event, gone, {"main", "refs/tags/v1.0.0"})
    assert (r.action, r.ref, r.sha) == ("sync", "refs/tags/v1.0.0", None)
    assert "deleted" in r.reason


def test_a_tag_push_never_syncs_a_branch_of_the_same_name() -> None:
    event, body = delivery("tag-push.json")
    assert route(event, body, {"v1.0.0"}).action == "ignore"
    assert route(event, {**body, "ref": "refs/heads/main"}, TRACKED).action == "ignore"


@pytest.mark.parametrize("name", ["merge-request-open.json", "merge-request-update.json"])
def test_merge_request_open_and_update_ask_for_a_review(name: str) -> None:
    event, body = delivery(name)
    r = route(event, body, TRACKED)
    assert (r.action, r.ref, r.mr_iid, r.source_branch) == ("review", "main", 7, "feature/x")
    assert r.sha == body["object_attributes"]["last_commit"]["id"]


def test_merge_request_merge_syncs_the_target_and_stops_its_preview_and_close_stops_it() -> None:
    merged = route(*delivery("merge-request-merge.json"), TRACKED)
    assert (merged.action, merged.ref, merged.mr_iid) == ("sync", "main", 7)
    assert merged.sha == "8ed0eafefa0835cdf28ab4278edbc6563e65e2d8"  # the merge's plan is checked
    closed = route(*delivery("merge-request-close.json"), TRACKED)
    assert (closed.action, closed.ref, closed.mr_iid) == ("stop", "main", 7)


@pytest.mark.parametrize("action", ["approved", "approval"])
def test_an_approval_reviews_again_so_a_forks_preview_can_deploy(action: str) -> None:
    event, body = delivery("merge-request-open.json")
    attrs = {**body["object_attributes"], "action": action}
    r = route(event, {**body, "object_attributes": attrs}, TRACKED)
    assert (r.action, r.mr_iid) == ("review", 7)
    attrs = {**body["object_attributes"], "action": "unapproved"}
    assert route(event, {**body, "object_attributes": attrs}, TRACKED).action == "ignore"


def test_merge_request_from_a_fork_is_marked() -> None:
    event, body = delivery("merge-request-open.json")
    attrs = body["object_attributes"]
    same = route(
        event,
        {**body, "object_attributes": {**attrs, "source_project_id": 1, "target_project_id": 1}},
        TRACKED,
    )
    fork = route(
        event,
        {**body, "object_attributes": {**attrs, "source_project_id": 2, "target_project_id": 1}},
        TRACKED,
    )
    assert (same.fork, fork.fork) == (False, True)


def test_merge_request_to_untracked_target_is_ignored() -> None:
    assert route(*delivery("merge-request-open.json"), {"production"}).action == "ignore"


def test_unknown_event_is_ignored_and_missing_header_is_malformed() -> None:
    assert route("Pipeline Hook", {}, TRACKED).action == "ignore"
    with pytest.raises(MalformedEvent, match="X-Gitlab-Event"):
        route(None, {}, TRACKED)


@pytest.mark.parametrize(
    ("event", "body", "needle"),
    [
        ("Push Hook", {}, "'ref'"),
        ("Push Hook", {"ref": 5}, "'ref'"),
        ("Merge Request Hook", {"object_attributes": []}, "object_attributes"),
        ("Merge Request Hook", {"object_attributes": {"iid": "7"}}, "iid"),
        ("Merge Request Hook", {"object_attributes": {"iid": 7, "source_branch": "x"}}, "target_branch"),
    ],
)
def test_malformed_bodies_say_what_is_wrong(event: str, body: dict[str, Any], needle: str) -> None:
    with pytest.raises(MalformedEvent, match=needle):
        route(event, body, TRACKED)


@pytest.mark.parametrize("raw", [b"not json", b"[1, 2]", b"\xff\xfe", b""])
def test_parse_body_refuses_non_objects(raw: bytes) -> None:
    with pytest.raises(MalformedEvent):
        parse_body(raw)


def test_token_check() -> None:
    assert is_token_valid("s3cret", "s3cret")
    assert not is_token_valid("s3cret", "s3cret ")
    assert not is_token_valid("s3cret", None)
    assert not is_token_valid(None, None)  # no secret never means "no token needed"
    assert not is_token_valid("", "")


def test_delivery_key_prefers_idempotency_key_else_hashes_the_body() -> None:
    assert delivery_key({"idempotency-key": "abc"}, b"x") == delivery_key({"idempotency-key": "abc"}, b"y")
    assert delivery_key({}, b"x") != delivery_key({}, b"y")
    assert delivery_key({}, b"x") == delivery_key({}, b"x")
