"""The HTTP answer of ``POST /environments/{env}/rollback`` (docs/services/config-sync.md).

Reads the body (``{"to": SHA | null, "merge": bool}``, both optional), runs the rollback
(in the route's worker thread: it fetches and pushes) and turns its outcome into a status
and a JSON document: 201 when the revert commit is pushed or its merge request opened, the
refusal's own status (400, 404, 409) with ``error``, 502 when git or GitLab failed.
"""

from __future__ import annotations

import logging
from typing import Any

from config_sync.rollbacks.revert import RollbackRefused
from config_sync.rollbacks.runner import Rollbacks
from phrame.git import GitError
from phrame.gitlab import GitLabError
from schemas import load_json

log = logging.getLogger(__name__)
FIELDS = ("to", "merge")


def read_request(raw: bytes) -> tuple[str | None, bool]:
    """``(to, merge)`` of a body; ``RollbackRefused(400)`` naming what is wrong."""
    if not raw.strip():
        return None, False
    try:
        doc = load_json(raw)
    except ValueError as e:
        raise RollbackRefused(f"body is not JSON: {e}", 400) from None
    if not isinstance(doc, dict):
        raise RollbackRefused("body must be a JSON object", 400)
    unknown = sorted(set(doc) - set(FIELDS))
    if unknown:
        raise RollbackRefused(f"unknown field(s) {', '.join(map(repr, unknown))}; known: to, merge", 400)
    merge = doc.get("merge", False)
    if not isinstance(merge, bool):
        raise RollbackRefused("'merge' must be true or false", 400)
    to = doc.get("to")
    if to is not None and not isinstance(to, str):
        raise RollbackRefused("'to' must be a commit sha or null", 400)
    return to, merge


def rollback_answer(
    rollbacks: Rollbacks, env: str, raw: bytes, *, who: str | None
) -> tuple[int, dict[str, Any]]:
    try:
        to, merge = read_request(raw)
        done = rollbacks.roll_back(env, to, merge=merge, who=who)
    except RollbackRefused as e:
        return e.status, {"error": str(e)}
    except (GitError, GitLabError) as e:
        log.warning("rollback of %s failed: %s", env, e)
        return 502, {"error": f"the git host failed: {e}"}
    status = "pushed" if done.branch is None else "merged" if done.merged else "merge-request"
    return 201, {"status": status, **done.to_dict()}
