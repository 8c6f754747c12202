"""Semantic rules of an environment's ``preview:`` block (docs/config/format.md#previews).

Called by :func:`phrame.config_repo.rules.semantic_problems`. Pure: each problem points at
the value that breaks the rule (file:line). A preview runs as environment
``<env>-mr-<iid>``, so the environment's own name must leave room for ``-mr-`` and an iid
of up to :data:`MAX_IID_DIGITS` digits within a name's 63 characters.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from phrame.config_repo.model import ConfigRepo, Document, Environment, PathPart
from phrame.config_repo.problems import Problem
from schemas.registry import pointer

NAME_MAX = 63  # schemas' name: 1-63 characters
PREVIEW_INFIX = "-mr-"
MAX_IID_DIGITS = 10  # GitLab's iids are 32-bit: at most 2,147,483,647
MAX_ENV_NAME_WITH_PREVIEW = NAME_MAX - len(PREVIEW_INFIX) - MAX_IID_DIGITS  # 49


def preview_name(environment: str, iid: int) -> str:
    """The environment a merge request's preview runs as."""
    return f"{environment}{PREVIEW_INFIX}{iid}"


def label_text(value: Any) -> str:
    """A label value as text (YAML ``true`` and ``"true"`` match each other, as in placement)."""
    return str(value).lower() if isinstance(value, bool) else str(value)


def nodes_with_labels(repo: ConfigRepo, labels: dict[str, Any]) -> list[str]:
    """The inventory nodes (schema-valid, not cordoned) carrying every one of ``labels``."""
    wanted = {str(k): label_text(v) for k, v in labels.items()}
    out = []
    for name, doc in sorted(repo.nodes.items()):
        if not doc.schema_ok or not isinstance(doc.data, dict) or doc.data.get("cordoned"):
            continue
        own = {str(k): label_text(v) for k, v in (doc.data.get("labels") or {}).items()}
        if all(own.get(k) == v for k, v in wanted.items()):
            out.append(name)
    return out


def _at(doc: Document, path: list[PathPart], rule: str, message: str) -> Problem:
    line, col = doc.position(path)
    return Problem(doc.file, line, col, rule, message, pointer(path))


def preview_problems(repo: ConfigRepo) -> Iterator[Problem]:
    for env in repo.environments.values():
        doc = env.doc
        if doc is None or not isinstance(doc.data, dict) or "preview" not in doc.data:
            continue
        if not doc.is_sound("preview"):
            continue  # the schema reported it
        yield from _checks(repo, env, doc, doc.data["preview"])


def _checks(repo: ConfigRepo, env: Environment, doc: Document, preview: dict[str, Any]) -> Iterator[Problem]:
    if len(env.name) > MAX_ENV_NAME_WITH_PREVIEW:
        msg = (
            f"environment name {env.name!r} is {len(env.name)} characters; with preview: it may have at most "
            f"{MAX_ENV_NAME_WITH_PREVIEW}, so that '{env.name}{PREVIEW_INFIX}<iid>' (an iid of up to "
            f"{MAX_IID_DIGITS} digits) stays a name of at most {NAME_MAX}"
        )
        yield _at(doc, ["preview"], "preview-name-too-long", msg)
    nodes = preview.get("nodes", {})
    if "node" in nodes:
        pin = nodes["node"]
        if pin not in repo.nodes:
            yield _at(doc, ["preview", "nodes", "node"], "unknown-node", f"node {pin!r} is not in nodes/")
    elif "labels" in nodes and not nodes_with_labels(repo, nodes["labels"]):
        shown = ", ".join(f"{k}={label_text(v)}" for k, v in sorted(nodes["labels"].items()))
        msg = f"no node in nodes/ carries the labels {shown} (or each is cordoned): no preview can run"
        yield _at(doc, ["preview", "nodes", "labels"], "preview-no-node", msg)
    for i, service in enumerate(preview.get("services", [])):
        if service not in env.services:
            msg = f"preview service {service!r}: no such service in {env.dir}/services/"
            yield _at(doc, ["preview", "services", i], "unknown-service", msg)
