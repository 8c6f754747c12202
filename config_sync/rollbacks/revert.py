"""What a rollback of one environment writes, purely: the target commit and the file changes.

:class:`config_sync.rollbacks.runner.Rollbacks` reads the trees and the deploy history and
asks here: which commit a rollback goes back to by default (the environment's previous
successful deployment), which files of ``environments/<env>/`` change (added, changed or
deleted, nothing else), and the message naming what it reverts. No I/O; a refusal is a
:class:`RollbackRefused` carrying its HTTP status.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from config_sync.deploys.records import CONVERGED, DeployRecord
from config_sync.errors import SyncError

SHA = re.compile(r"^[0-9a-f]{7,40}$")
NAME = re.compile(r"^[a-z0-9][a-z0-9-]{0,62}$")


class RollbackRefused(SyncError):
    """A rollback that must not be made (answered with ``status`` and this message)."""

    def __init__(self, message: str, status: int = 409) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class Rollback:
    """What was done: ``commit`` the revert commit (pushed, or on ``branch`` for a merge request)."""

    environment: str
    ref: str
    to: str
    commit: str
    files: tuple[str, ...]
    branch: str | None = None  # GitLab: the rollback branch of the merge request
    mr_iid: int | None = None
    mr_url: str | None = None
    merged: bool | None = None  # GitLab with merge asked: whether GitLab merged it
    merge_refused: str | None = None  # GitLab's reason when it did not

    def to_dict(self) -> dict[str, object]:
        doc: dict[str, object] = {
            "environment": self.environment,
            "ref": self.ref,
            "to": self.to,
            "commit": self.commit,
            "files": list(self.files),
        }
        if self.branch is not None:
            doc |= {"branch": self.branch, "mr": self.mr_iid, "mr_url": self.mr_url}
            doc |= {"merged": self.merged, "merge_refused": self.merge_refused}
        return doc


def folder(env: str) -> str:
    return f"environments/{env}"


def previous_success(records: Sequence[DeployRecord]) -> str | None:
    """The commit of the newest converged deployment before the current one (``records``
    newest first: the first is what runs now, whatever its state)."""
    if not records:
        return None
    current = records[0].commit
    for r in records[1:]:
        if r.state == CONVERGED and r.commit != current:
            return r.commit
    return None


def file_changes(now: Mapping[str, bytes], then: Mapping[str, bytes]) -> dict[str, bytes | None]:
    """The writes that make the files ``now`` equal to ``then``: path -> content, or None to delete."""
    return {p: then.get(p) for p in sorted(set(now) | set(then)) if now.get(p) != then.get(p)}


def message(env: str, to: str, subject: str, *, who: str | None) -> str:
    """``Roll back <env> to <short sha> (<subject>)`` and a body saying what it holds."""
    title = f"Roll back {env} to {to[:12]} ({subject or 'no message'})"
    body = (
        f"environments/{env}/ as it was at {to}; other environments and nodes/ are unchanged.\n"
        f"Made by phrame rollback{f' for {who}' if who else ''}."
    )
    return f"{title}\n\n{body}\n"


def branch_name(env: str, to: str) -> str:
    return f"rollback/{env}/{to[:12]}"


def check_name(env: str) -> None:
    if not NAME.match(env):
        raise RollbackRefused(f"environment {env!r} is not a name ({NAME.pattern})", 400)


def check_sha(to: object) -> str | None:
    """The ``to`` of a request: None (the default) or 7 to 40 lower-case hex digits."""
    if to is None:
        return None
    if not isinstance(to, str) or not SHA.match(to):
        raise RollbackRefused(f"'to' must be a commit sha (7 to 40 hex digits), not {to!r}"[:200], 400)
    return to
