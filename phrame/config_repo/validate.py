"""Validation: every file against its JSON Schema, then the semantic rules across files.

Returns all problems of a repository in one run, sorted by file and line; never raises
for bad content. Schema errors are turned into one-line messages that name the key.
"""

from __future__ import annotations

from typing import Any

from jsonschema.exceptions import ValidationError

import schemas
from phrame.config_repo.cache import ReadCache
from phrame.config_repo.model import ConfigRepo, Document
from phrame.config_repo.payload_size import payload_problems
from phrame.config_repo.problems import Problem
from phrame.config_repo.rules import semantic_problems
from phrame.config_repo.yaml_scalars import YAML11_BOOLEANS
from schemas.registry import pointer, surely_valid


def schema_name(kind: str, doc: Document) -> str:
    if kind == "service":
        is_process = isinstance(doc.data, dict) and doc.data.get("kind") == "process"
        return "service-process" if is_process else "service-container"
    return kind


def _within_one_form(error: ValidationError) -> ValidationError | None:
    """For a oneOf/anyOf the value's type picks one form of (``env: {X: {file: ...}}``
    is the mapping form): that form's first error, which says more than "not valid under
    any of the given schemas". None when the forms' errors are not all from one form."""
    if error.validator not in ("oneOf", "anyOf") or not error.context:
        return None
    forms = [(e.relative_schema_path[0], list(e.relative_schema_path)[1:], e) for e in error.context]
    wrong_type = {form for form, rest, _ in forms if rest == ["type"]}
    left = [(form, e) for form, _, e in forms if form not in wrong_type]
    if not left or len({form for form, _ in left}) != 1:
        return None
    # an unknown key names what is wrong better than the missing one it was meant to be
    return min((e for _, e in left), key=lambda e: (e.validator != "additionalProperties", -len(e.path)))


def _yaml11_hint(error: ValidationError) -> str:
    """For a value YAML 1.1 read as a boolean (``yes``, ``on``, ``n``…): YAML 1.2, which
    the reader follows, reads it as text. Said where it makes a schema error only: a text
    field that takes any text (``env: {DEBUG: yes}``) gets the text "yes", no problem."""
    value = error.instance
    if not isinstance(value, str) or value not in YAML11_BOOLEANS:
        return ""
    expected = error.validator_value if error.validator == "type" else None
    if expected == "boolean" or (isinstance(expected, list) and "boolean" in expected):
        truth = "true" if value.lower() in ("y", "yes", "on") else "false"
        return f"; YAML 1.2 reads {value} as text, not a boolean: use {truth}"
    return f"; YAML 1.2 reads {value} as the text {value!r}, not a boolean"


def _message(error: ValidationError) -> tuple[list[Any], str]:
    """A readable message, and the path it should point at."""
    inner = _within_one_form(error)
    if inner is not None:
        return _message(inner)
    path, message = _base_message(error)
    return path, message + _yaml11_hint(error)


def _base_message(error: ValidationError) -> tuple[list[Any], str]:
    path = list(error.absolute_path)
    schema = error.schema if isinstance(error.schema, dict) else {}
    keyword = error.validator
    if keyword == "additionalProperties" and isinstance(error.instance, dict):
        allowed = set(schema.get("properties", {}))
        extra = sorted(k for k in error.instance if k not in allowed)
        if extra:
            known = ", ".join(sorted(allowed))
            return [*path, extra[0]], f"unknown key {extra[0]!r} (allowed: {known})"
    if keyword == "format" and error.cause is not None:  # schemas.formats says why
        return path, f"{error.instance!r} is not valid: {error.cause}"
    if keyword in ("oneOf", "anyOf", "pattern") and "description" in schema:
        return path, f"{error.instance!r} is not valid: {schema['description']}"
    if keyword in ("maxItems", "maxProperties") and isinstance(error.instance, list | dict):
        # jsonschema's message quotes the whole value: thousands of items
        unit = "items" if keyword == "maxItems" else "entries"
        return path, f"{len(error.instance)} {unit}; at most {error.validator_value} are allowed here"
    if keyword == "propertyNames":
        bad = error.instance if isinstance(error.instance, str) else None
        return path, error.message if bad is None else f"invalid key {bad!r}: {error.message}"
    if keyword == "type" and error.instance is None and not path:
        return path, "the file is empty; it must hold a mapping"
    return path, error.message


def _unsound(error: ValidationError) -> list[tuple[Any, ...]]:
    """The parts of the document an error makes unreadable for the semantic rules: a
    missing or unknown key is its own part, anything else the value the error is about."""
    path = tuple(error.absolute_path)
    instance = error.instance
    if error.validator == "required" and isinstance(instance, dict):
        return [(*path, k) for k in error.validator_value if k not in instance] or [path]
    if error.validator == "additionalProperties" and isinstance(instance, dict):
        allowed = error.schema.get("properties", {}) if isinstance(error.schema, dict) else {}
        return [(*path, k) for k in instance if k not in allowed] or [path]
    return [path]


def schema_problems(kind: str, doc: Document, cache: ReadCache | None = None) -> list[Problem]:
    if doc.checked is not None and doc.checked[0] == kind:
        return list(doc.checked[1])  # its marks were set with it (the schema: the kind's, by content)
    name = schema_name(kind, doc)
    key = ("schema", name, doc.file, doc.content_id)
    cached = cache.get(key) if cache is not None and doc.content_id else None
    if cached is not None:
        problems, doc.unsound = cached
        doc.schema_ok = not problems
        doc.checked = (kind, tuple(problems))
        return list(problems)
    found, unsound = [], set()
    errors = () if surely_valid(name, doc.data) else schemas.validator(name).iter_errors(doc.data)
    for error in errors:
        path, message = _message(error)
        is_key = error.validator in ("additionalProperties", "propertyNames")
        line, col = doc.position(path, key=is_key)
        found.append(Problem(doc.file, line, col, "schema", message, pointer(path)))
        unsound.update(_unsound(error))
    doc.schema_ok, doc.unsound = not found, frozenset(unsound)
    doc.checked = (kind, tuple(found))
    if cache is not None and doc.content_id:
        cache.put(key, (tuple(found), doc.unsound))
    return found


def validate(
    repo: ConfigRepo, read_problems: list[Problem] | None = None, *, cache: ReadCache | None = None
) -> list[Problem]:
    """All problems of ``repo``: those found while reading, schema, then semantic rules.
    With ``cache``, files whose content was checked before are not checked again."""
    problems = list(read_problems or [])
    checks: list[tuple[str, Document]] = [("node", d) for d in repo.nodes.values()]
    for env in repo.environments.values():
        if env.doc is not None:
            checks.append(("environment", env.doc))
        if env.placement is not None:
            checks.append(("placement", env.placement))
        checks += [("network", d) for d in env.networks.values()]
        checks += [("service", d) for d in env.services.values()]
    for kind, doc in checks:
        if not doc.is_readable:
            continue  # unreadable: already reported by the reader
        problems += schema_problems(kind, doc, cache)
    problems += semantic_problems(repo, cache)
    if not problems:  # render needs what the schemas and rules guarantee
        problems += payload_problems(repo, cache=cache)
    repo.problems = sorted(set(problems), key=lambda p: (p.file, p.line, p.column, p.rule, p.message))
    return repo.problems
