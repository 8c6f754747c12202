"""Reading GitLab webhook deliveries and deciding what each one asks for (docs/services/config-sync.md).

Pure: the app hands in headers and the raw body; this module checks the token, derives
the delivery key and routes the event to a sync of a tracked ref (a branch's Push Hook,
a tracked tag's Tag Push Hook), a merge-request review or nothing. It never fetches,
publishes or waits; a delivery is only a trigger.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any

from config_sync.errors import SyncError
from schemas import load_json

ZERO_SHA = "0" * 40
BRANCH_PREFIX = "refs/heads/"
TAG_PREFIX = "refs/tags/"  # a tracked tag keeps its full name (Environment.track)
MR_REVIEW_ACTIONS = ("open", "reopen", "update")
# an approval reviews again: a fork's preview waits for one (GitLab sends ``approved`` when the
# required approvals are met, ``approval`` for each one before that)
MR_APPROVAL_ACTIONS = ("approved", "approval")
MR_STOP_ACTIONS = ("close",)  # its preview is stopped (``merge`` stops it too, beside the sync)
MAX_IID = 2**31 - 1  # GitLab's iids are 32-bit; anything else is not from GitLab


class MalformedEvent(SyncError):
    """The request is not a GitLab event we can read (answered 400 with this message)."""


@dataclass(frozen=True)
class Route:
    """What a delivery asks for: ``sync`` (of ``ref``), ``review`` (a merge request), ``stop``
    (a closed merge request's preview) or ``ignore``. A merged merge request is a ``sync`` of
    its target with ``mr_iid`` set: its preview is stopped too. ``fork``: the merge request
    comes from another project (its preview waits for an approval)."""

    action: str
    reason: str
    ref: str | None = None
    mr_iid: int | None = None
    source_branch: str | None = None
    sha: str | None = None
    fork: bool = False


def is_token_valid(expected: str | None, given: str | None) -> bool:
    """Constant-time comparison; an empty or missing secret or token never matches (the
    app alone decides to skip the check, and only when explicitly insecure)."""
    if not expected or not given:
        return False
    return hmac.compare_digest(expected.encode(), given.encode("utf-8", "surrogatepass"))


def delivery_key(headers: Mapping[str, str], body: bytes) -> str:
    """GitLab's ``Idempotency-Key`` (the same across retries), else a hash of the body."""
    key = headers.get("idempotency-key") or headers.get("Idempotency-Key")
    if key:
        return "key:" + key.strip()
    return "sha256:" + hashlib.sha256(body).hexdigest()


def parse_body(body: bytes) -> dict[str, Any]:
    try:
        doc = load_json(body)
    except ValueError as e:
        raise MalformedEvent(f"body is not JSON: {e}") from None
    if not isinstance(doc, dict):
        raise MalformedEvent("body must be a JSON object")
    return doc


def _text(doc: Mapping[str, Any], key: str, where: str) -> str:
    value = doc.get(key)
    if not isinstance(value, str) or not value:
        raise MalformedEvent(f"{where}: {key!r} must be a non-empty string")
    try:  # a lone surrogate is legal JSON but cannot be echoed, logged or passed to git
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise MalformedEvent(f"{where}: {key!r} is not valid Unicode (a lone surrogate)") from None
    return value


def _push(body: Mapping[str, Any], tracked: Collection[str]) -> Route:
    ref = _text(body, "ref", "push event")
    if not ref.startswith(BRANCH_PREFIX):
        return Route("ignore", f"{ref} is not a branch")
    branch = ref.removeprefix(BRANCH_PREFIX)
    if branch not in tracked:
        return Route("ignore", f"branch {branch} is not tracked")
    if body.get("after") == ZERO_SHA or body.get("checkout_sha", "") is None:
        # Deleting a tracked branch deploys nothing: the last good state stays published.
        return Route("ignore", f"tracked branch {branch} was deleted; keeping the last state")
    return Route("sync", f"push to {branch}", ref=branch, sha=body.get("checkout_sha"))


def _tag_push(body: Mapping[str, Any], tracked: Collection[str]) -> Route:
    ref = _text(body, "ref", "tag push event")
    if not ref.startswith(TAG_PREFIX):
        return Route("ignore", f"{ref} is not a tag")
    if ref not in tracked:
        return Route("ignore", f"tag {ref.removeprefix(TAG_PREFIX)} is not tracked")
    if body.get("after") == ZERO_SHA or body.get("checkout_sha", "") is None:
        # the sync finds it gone, keeps the last good state and reports that on the sync topic
        return Route("sync", f"tracked tag {ref} was deleted; reporting it", ref=ref)
    # created or moved: a release; the sync reads where the tag points now, not the payload
    return Route("sync", f"tag push to {ref}", ref=ref, sha=body.get("checkout_sha"))


def _merge_request(body: Mapping[str, Any], tracked: Collection[str]) -> Route:
    attrs = body.get("object_attributes")
    if not isinstance(attrs, dict):
        raise MalformedEvent("merge request event: 'object_attributes' must be an object")
    iid = attrs.get("iid")
    if not isinstance(iid, int) or isinstance(iid, bool):
        raise MalformedEvent("merge request event: 'object_attributes.iid' must be an integer")
    if not 1 <= iid <= MAX_IID:
        shown = str(iid) if iid.bit_length() <= 64 else f"a {iid.bit_length()}-bit number"
        raise MalformedEvent(
            f"merge request event: 'object_attributes.iid' must be between 1 and {MAX_IID}, not {shown}"
        )
    target = _text(attrs, "target_branch", "merge request event")
    source = _text(attrs, "source_branch", "merge request event")
    action = attrs.get("action")
    if target not in tracked:
        return Route("ignore", f"!{iid} targets {target}, which is not tracked")
    if action == "merge":  # the iid and merge commit: the merge's plan is checked against the review
        merged = attrs.get("merge_commit_sha")
        merged = merged if isinstance(merged, str) and merged.isascii() and merged.isalnum() else None
        return Route("sync", f"!{iid} merged into {target}", ref=target, mr_iid=iid, sha=merged)
    if action in MR_STOP_ACTIONS:
        return Route("stop", f"!{iid} {action}d: its preview is stopped", ref=target, mr_iid=iid)
    if action not in MR_REVIEW_ACTIONS and action not in MR_APPROVAL_ACTIONS:
        return Route("ignore", f"!{iid}: action {action!r} needs no review")
    last = attrs.get("last_commit")
    sha = last.get("id") if isinstance(last, dict) else None
    sha = sha if isinstance(sha, str) and sha.isascii() else None  # informative only
    source_project, target_project = attrs.get("source_project_id"), attrs.get("target_project_id")
    fork = source_project is not None and target_project is not None and source_project != target_project
    return Route(
        "review", f"!{iid} {action}", ref=target, mr_iid=iid, source_branch=source, sha=sha, fork=fork
    )


def route(event: str | None, body: Mapping[str, Any], tracked: Collection[str]) -> Route:
    """Route one delivery of ``X-Gitlab-Event: event``; raise :class:`MalformedEvent` when unreadable."""
    if not event:
        raise MalformedEvent("missing X-Gitlab-Event header")
    if event == "Push Hook":
        return _push(body, tracked)
    if event == "Merge Request Hook":
        return _merge_request(body, tracked)
    if event == "Tag Push Hook":
        return _tag_push(body, tracked)
    return Route("ignore", f"event {event!r} is not handled")
