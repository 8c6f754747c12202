"""The shapes of the compose import's answers (``POST /api/import/compose``), as TypedDicts.

Beside :mod:`topic_api.models` (the read and write answers); published by
:mod:`topic_api.openapi.document` from the import route's ``@operation``. They describe what
``topic_api.imports.proposal`` returns. No behaviour here.
"""

from __future__ import annotations

from typing import Annotated, Literal, TypedDict

from topic_api.models import Count
from topic_api.openapi.json_schema import Doc


class Problem(TypedDict):
    file: str
    line: int
    column: int
    rule: str
    message: str
    path: str


class Unsupported(TypedDict):
    service: str
    key: str
    reason: str


class Dangerous(TypedDict):
    service: str
    key: str
    reason: str


class Validation(TypedDict):
    valid: bool
    scope: Literal["repository", "files"]
    base: str | None
    existing_problems: Count


class MergeRequest(TypedDict):
    iid: int
    web_url: str


class ComposeImport(TypedDict):
    environment: str
    node: str | None
    files: Annotated[
        dict[str, str], Doc("repo-relative path -> YAML text: what the branch carries (or would)")
    ]
    kept: Annotated[list[str], Doc("files left as the tracked head has them (an existing environment.yaml)")]
    unsupported: list[Unsupported]
    dangerous: Annotated[
        list[Dangerous],
        Doc(
            "settings kept that give a service power over its host (a host bind mount, the Docker "
            "socket, a port on every interface, root): an agent runs them only where its node policy allows"
        ),
    ]
    validation: Validation
    dry_run: bool
    branch: str | None
    commit: str | None
    merge_request: MergeRequest | None


class ImportInvalid(TypedDict):
    error: str
    problems: list[Problem]
