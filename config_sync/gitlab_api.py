"""Telling the git host what config-sync found and did (docs/operations/gitlab.md): statuses and review notes.

The sync and review passes call a :class:`CommitReporter`. ``GitLabReporter`` is the only
module importing python-gitlab: commit statuses under one stable name each (a repeated
transition counts as success), one review note per merge request found again by its hidden
marker and edited in place; it never writes a branch or a tag.
``LocalReporter`` (PHRAME_GIT_HOST=local) logs and keeps the latest for ``/status``.
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from typing import Any, Protocol

import gitlab
import requests
from gitlab import exceptions as gl_exc

from config_sync.errors import GitLabError
from config_sync.review_note import REVIEW_NOTE_MARKER

log = logging.getLogger(__name__)

STATES = ("pending", "running", "success", "failed", "canceled")
_KEEP = 50  # statuses kept in memory for /status and for skipping repeats


class CommitReporter(Protocol):
    """Statuses and review notes on the git host. A call raises :class:`GitLabError` when the
    host refuses or cannot be reached (callers log it and go on); anything else is a bug."""

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

    def failed(self, text: str) -> GitLabError:
        """Remember ``text`` for /status and return the error to raise."""
        with self.lock:
            self.last_error = text
        return GitLabError(text)

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

    def snapshot(self) -> dict[str, Any]:
        with self.lock:
            return {
                "statuses": list(self.statuses.values())[-20:],
                "plans": {str(k): v for k, v in sorted(self.notes.items())[-20:]},
                "last_error": self.last_error,
            }


def _check_state(state: str) -> None:
    if state not in STATES:
        raise ValueError(f"unknown commit status state {state!r}")


class LocalReporter:
    """No git host API: statuses and plans are logged and kept for ``GET /status``."""

    def __init__(self) -> None:
        self.memory = _Memory()

    def set_status(
        self, sha: str, name: str, state: str, description: str, *, ref: str | None = None
    ) -> None:
        _check_state(state)
        if not self.memory.is_repeat(sha, name, state, description):
            log.info("status %s of %s: %s (%s)", name, sha[:12], state, description)
        self.memory.remember(sha, name, state, description, ref)

    def upsert_review_note(self, mr_iid: int, body: str) -> None:
        log.info("plan for !%d:\n%s", mr_iid, body)
        with self.memory.lock:
            self.memory.notes[mr_iid] = body

    def snapshot(self) -> dict[str, Any]:
        return self.memory.snapshot()


class GitLabReporter:
    """Statuses and review notes through GitLab's REST API (token scope ``api``)."""

    def __init__(self, url: str, token: str, project: str | int, *, timeout: float = 10.0) -> None:
        # No retries here: a sync pass must not stall on a GitLab outage; a status that
        # failed is not remembered, so the next pass (or poll) sets it again.
        self.gl = gitlab.Gitlab(url, private_token=token, timeout=timeout, retry_transient_errors=False)
        self.project = self.gl.projects.get(project, lazy=True)
        self.memory = _Memory()

    def set_status(
        self, sha: str, name: str, state: str, description: str, *, ref: str | None = None
    ) -> None:
        _check_state(state)
        if self.memory.is_repeat(sha, name, state, description):
            return  # GitLab would answer 400 for the repeated transition anyway
        data = {"state": state, "name": name, "description": description[:255]}
        if ref:  # GitLab names a tag by its short name: refs/tags/v1 -> v1
            data["ref"] = ref.removeprefix("refs/tags/")
        try:
            self.project.commits.get(sha, lazy=True).statuses.create(data)
        except gl_exc.GitlabCreateError as e:
            if not _is_repeated_transition(e):
                raise self.memory.failed(f"status {name}={state} on {sha[:12]}: {_why(e)}") from e
            log.debug("status %s=%s on %s was already set", name, state, sha[:12])
        except (gl_exc.GitlabError, requests.RequestException) as e:
            raise self.memory.failed(f"status {name}={state} on {sha[:12]}: {_why(e)}") from e
        self.memory.remember(sha, name, state, description, ref)

    def upsert_review_note(self, mr_iid: int, body: str) -> None:
        """Edit the note carrying :data:`REVIEW_NOTE_MARKER`, or create it: never two review notes."""
        if REVIEW_NOTE_MARKER not in body:
            body = f"{REVIEW_NOTE_MARKER}\n{body}"
        try:
            mr = self.project.mergerequests.get(mr_iid, lazy=True)
            existing = next(
                (n for n in mr.notes.list(iterator=True, sort="asc") if REVIEW_NOTE_MARKER in (n.body or "")),
                None,
            )
            if existing is None:
                mr.notes.create({"body": body})
            elif existing.body != body:
                existing.body = body
                existing.save()
        except (gl_exc.GitlabError, requests.RequestException) as e:
            raise self.memory.failed(f"plan note on !{mr_iid}: {_why(e)}") from e
        with self.memory.lock:
            self.memory.notes[mr_iid] = body

    def snapshot(self) -> dict[str, Any]:
        return self.memory.snapshot()


def _why(e: gl_exc.GitlabError | requests.RequestException) -> str:
    """GitLab's answer, or (python-gitlab passes these through) why there was none."""
    if isinstance(e, requests.RequestException):
        return f"GitLab unreachable: {type(e).__name__}: {e}"
    return f"{e.response_code} {e.error_message}" if e.response_code else str(e.error_message)


def _is_repeated_transition(e: gl_exc.GitlabError) -> bool:
    return e.response_code == 400 and "Cannot transition status" in str(e.error_message)
