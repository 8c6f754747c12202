"""What a compose import proposes: its branch name, commit message, merge request text and
the JSON answer of ``POST /api/import/compose``.

Pure: called by :mod:`topic_api.compose_routes` and the two targets (``import_local``,
``import_gitlab``). An import is a change for review, never a deployment: its branch is
``phrame-import/<env>-<id>``, never the tracked branch, and ``id`` is a hash of the files, so
the same import proposed twice names the same branch (refused the second time).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

from phrame.compose import ImportResult
from phrame.config_repo import Problem
from topic_api.errors import TopicApiError

BRANCH_PREFIX = "phrame-import/"
ID_LENGTH = 8
AUTHOR = ("phrame-topic-api", "topic-api@phrame.invalid")


class ImportRefused(TopicApiError):
    """The import is refused: ``status`` is the HTTP answer; ``problems`` the validation's."""

    def __init__(self, status: int, message: str, problems: list[Problem] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.problems = problems or []

    def to_json(self) -> dict[str, Any]:
        doc: dict[str, Any] = {"error": str(self)}
        if self.status == 422:
            doc["problems"] = [p.to_dict() for p in self.problems]
        return doc


@dataclass(frozen=True)
class Draft:
    """One import to propose: the environment, the pin and the files ``phrame.compose`` made."""

    env: str
    node: str | None
    result: ImportResult

    @property
    def id(self) -> str:
        text = json.dumps(sorted(self.result.files.items()), ensure_ascii=False)
        return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:ID_LENGTH]

    @property
    def branch(self) -> str:
        return f"{BRANCH_PREFIX}{self.env}-{self.id}"

    @property
    def title(self) -> str:
        pin = f" pinned to node {self.node}" if self.node else ""
        return f"Import compose services into environment {self.env}{pin}"

    def unsupported_lines(self) -> list[str]:
        return [u.format() for u in self.result.unsupported]

    def dangerous_lines(self) -> list[str]:
        return [d.format() for d in self.result.dangerous]

    def commit_message(self, files: list[str]) -> str:
        lines = [self.title, "", "Files:", *(f"  {f}" for f in sorted(files))]
        if self.result.unsupported:
            lines += [
                "",
                "Not carried (no phrame equivalent):",
                *(f"  {u}" for u in self.unsupported_lines()),
            ]
        if self.result.dangerous:
            lines += ["", "Kept, with power over the host:", *(f"  {d}" for d in self.dangerous_lines())]
        return "\n".join([*lines, "", "Imported-By: phrame topic-api (POST /api/import/compose)", ""])

    def description(self, files: list[str], validation: str) -> str:
        """The merge request's description (Markdown)."""
        out = [
            f"Services imported from a compose file into `environments/{self.env}/` by the "
            "phrame topic API. Review before merging: merging deploys them.",
            "",
            "**Files**",
            *(f"- `{f}`" for f in sorted(files)),
            "",
            "**Compose features with no phrame equivalent (not carried)**",
        ]
        out += [f"- {u}" for u in self.unsupported_lines()] or ["- none"]
        out += ["", "**Kept, with power over the host (a node runs them only where its policy allows)**"]
        out += [f"- {d}" for d in self.dangerous_lines()] or ["- none"]
        return "\n".join([*out, "", f"**Validation**: {validation}", ""])


@dataclass
class Proposal:
    """The answer: files proposed, what was kept, validation, and where they were written."""

    draft: Draft
    files: dict[str, str]
    kept: list[str] = field(default_factory=list)
    scope: str = "files"  # "repository": the tracked head plus the files; "files": them alone
    base: str | None = None  # the tracked head's commit the files were checked on
    problems: list[Problem] = field(default_factory=list)  # those the import did not cause
    branch: str | None = None
    commit: str | None = None
    merge_request: dict[str, Any] | None = None

    def to_json(self, *, dry_run: bool) -> dict[str, Any]:
        return {
            "environment": self.draft.env,
            "node": self.draft.node,
            "files": self.files,
            "kept": sorted(self.kept),
            "unsupported": [
                {"service": u.service, "key": u.key, "reason": u.reason}
                for u in self.draft.result.unsupported
            ],
            "dangerous": [
                {"service": d.service, "key": d.key, "reason": d.reason} for d in self.draft.result.dangerous
            ],
            "validation": {
                "valid": True,
                "scope": self.scope,
                "base": self.base,
                "existing_problems": len(self.problems),
            },
            "dry_run": dry_run,
            "branch": self.branch,
            "commit": self.commit,
            "merge_request": self.merge_request,
        }
