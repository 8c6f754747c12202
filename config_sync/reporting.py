"""Telling the git host what config-sync found and did (docs/operations/gitlab.md): statuses and review notes.

The sync, deploy and rollout passes call a :class:`CommitReporter`. ``GitLabReporter`` goes
through the shared adapter (``phrame.gitlab``) and skips repeats it already set;
``LocalReporter`` (PHRAME_GIT_HOST=local) logs. Both keep the latest for ``/status``.
Neither ever writes a branch or a tag.
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from typing import Any, Protocol

from config_sync.review_note import REVIEW_NOTE_MARKER
from phrame.gitlab import STATES, GitLabError, GitLabProject

log = logging.getLogger(__name__)

_KEEP = 50  # statuses kept in memory for /status and for skipping repeats


class CommitReporter(Protocol):
    """Statuses and review notes on the git host. A call raises ``phrame.gitlab.GitLabError``
    when the host refuses or cannot be reached (callers log it and go on); anything else is a bug."""

    def set_status(
        self, sha: str, name: str, state: str, description: str, *, ref: str | None = None
    ) -> None: ...

    def upsert_review_note(self, mr_iid: int, body: str) -> None: ...

    def snapshot(self) -> dict[str, Any]: ...


class _Memory:
    """The latest statuses and notes, so repeats are skipped and /status can show them."""

    def __init__(self) -> None:
        self.statuses: OrderedDict[tuple[str, str], dict[str, Any]] = OrderedDict()
        self.notes: dict[int, str] = {}
        self.last_error: str | None = None  # the latest failed call, for /status
        self.lock = threading.Lock()

    def failed(self, text: str) -> None:
        """Remember ``text`` (the failed call) for /status."""
        with self.lock:
            self.last_error = text

    def is_repeat(self, sha: str, name: str, state: str, description: str) -> bool:
        with self.lock:
            old = self.statuses.get((sha, name))
            return old is not None and (old["state"], old["description"]) == (state, description)

    def remember(self, sha: str, name: str, state: str, description: str, ref: str | None) -> None:
        with self.lock:
            self.statuses[(sha, name)] = {
                "sha": sha,
                "name": name,
                "state": state,
                "description": description,
                "ref": ref,
            }
            self.statuses.move_to_end((sha, name))
            self.last_error = None
            while len(self.statuses) > _KEEP:
                self.statuses.popitem(last=False)

    def note(self, mr_iid: int, body: str) -> None:
        with self.lock:
            self.notes[mr_iid] = body

    def snapshot(self) -> dict[str, Any]:
        with self.lock:
            return {
                "statuses": list(self.statuses.values())[-20:],
                "plans": {str(k): v for k, v in sorted(self.notes.items())[-20:]},
                "last_error": self.last_error,
            }


class LocalReporter:
    """No git host API: statuses and plans are logged and kept for ``GET /status``."""

    def __init__(self) -> None:
        self.memory = _Memory()

    def set_status(
        self, sha: str, name: str, state: str, description: str, *, ref: str | None = None
    ) -> None:
        if state not in STATES:
            raise ValueError(f"unknown commit status state {state!r}")
        if not self.memory.is_repeat(sha, name, state, description):
            log.info("status %s of %s: %s (%s)", name, sha[:12], state, description)
        self.memory.remember(sha, name, state, description, ref)

    def upsert_review_note(self, mr_iid: int, body: str) -> None:
        log.info("plan for !%d:\n%s", mr_iid, body)
        self.memory.note(mr_iid, body)

    def snapshot(self) -> dict[str, Any]:
        return self.memory.snapshot()


class GitLabReporter:
    """Statuses and the review note through GitLab's REST API (token scope ``api``)."""

    def __init__(self, url: str, token: str, project: str | int, *, timeout: float = 10.0) -> None:
        self.gitlab = GitLabProject(url, token, project, timeout=timeout)
        self.memory = _Memory()

    def set_status(
        self, sha: str, name: str, state: str, description: str, *, ref: str | None = None
    ) -> None:
        if self.memory.is_repeat(sha, name, state, description):
            return  # GitLab would answer 400 for the repeated transition anyway
        try:
            self.gitlab.set_status(sha, name, state, description, ref=ref)
        except GitLabError as e:  # not remembered: the next pass sets it again
            self.memory.failed(f"status {name}={state} on {sha[:12]}: {e.reason}")
            raise
        self.memory.remember(sha, name, state, description, ref)

    def upsert_review_note(self, mr_iid: int, body: str) -> None:
        """Edit the note carrying :data:`REVIEW_NOTE_MARKER`, or create it: never two review notes."""
        try:
            posted = self.gitlab.merge_requests.upsert_note(mr_iid, body, REVIEW_NOTE_MARKER)
        except GitLabError as e:
            self.memory.failed(f"plan note on !{mr_iid}: {e.reason}")
            raise
        self.memory.note(mr_iid, posted)

    def snapshot(self) -> dict[str, Any]:
        return self.memory.snapshot()
