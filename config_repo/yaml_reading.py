"""Parsing one YAML (or JSON) file into a Document, refusing the hazards first.

Hazards are refused with a Problem, never a traceback: non-UTF-8 bytes, tab indentation,
syntax errors, duplicate keys, and alias/anchor expansion bombs (detected on the event
stream, before anything is expanded).
"""

from __future__ import annotations

import datetime as dt
import json
import math
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.error import MarkedYAMLError, YAMLError
from ruamel.yaml.events import (
    AliasEvent,
    CollectionStartEvent,
    MappingEndEvent,
    ScalarEvent,
    SequenceEndEvent,
)

from config_repo.model import Document
from config_repo.problems import Problem

# An anchor may be reused, but the expanded document may not grow past this many nodes
# more than it has written out: a few KiB of "billion laughs" would otherwise expand to GiB.
ALIAS_GROWTH_LIMIT = 10
ALIAS_SLACK_NODES = 1000


def _yaml() -> YAML:
    y = YAML(typ="rt")
    y.allow_duplicate_keys = False
    return y


_YAML = _yaml()


def decode(file: str, raw: bytes) -> tuple[str | None, list[Problem]]:
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        line = raw.count(b"\n", 0, e.start) + 1
        col = e.start - (raw.rfind(b"\n", 0, e.start) + 1) + 1
        msg = f"file is not UTF-8: byte 0x{raw[e.start]:02x} cannot be decoded; save it as UTF-8"
        return None, [Problem(file, line, col, "yaml-encoding", msg)]
    return text.removeprefix("\ufeff"), []


def _tab_problems(file: str, text: str) -> list[Problem]:
    problems = []
    for n, line in enumerate(text.splitlines(), start=1):
        indent = line[: len(line) - len(line.lstrip(" \t"))]
        if "\t" in indent:
            col = indent.index("\t") + 1
            msg = "tab used for indentation; YAML allows only spaces"
            problems.append(Problem(file, n, col, "yaml-tab", msg))
    return problems


def _alias_bomb(file: str, text: str) -> Problem | None:
    """Walk the event stream, computing each anchored node's expanded size."""
    sizes: dict[str, int] = {}
    # stack of [anchor, nodes counted so far] for open collections
    stack: list[list[Any]] = []
    written = expanded = 0
    for event in _YAML.parse(text):
        if isinstance(event, ScalarEvent | AliasEvent):
            n = 1 if isinstance(event, ScalarEvent) else sizes.get(event.anchor, 1)
            written += 1
            expanded += n
            if isinstance(event, ScalarEvent) and event.anchor:
                sizes[event.anchor] = 1
            if stack:
                stack[-1][1] += n
            if expanded > ALIAS_GROWTH_LIMIT * written + ALIAS_SLACK_NODES:
                mark = event.start_mark
                msg = (
                    f"alias *{event.anchor} expands the document past {expanded} nodes "
                    f"from {written} written; anchors that multiply are refused"
                )
                return Problem(file, mark.line + 1, mark.column + 1, "yaml-alias-bomb", msg)
        elif isinstance(event, CollectionStartEvent):
            written += 1
            expanded += 1
            stack.append([event.anchor, 1])
        elif isinstance(event, MappingEndEvent | SequenceEndEvent):
            anchor, n = stack.pop()
            if anchor:
                sizes[anchor] = n
            if stack:
                stack[-1][1] += n
    return None


def plain(value: Any) -> Any:
    """ruamel round-trip objects → plain JSON-like data."""
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [plain(v) for v in value]
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        # .inf/.nan have no JSON form: keep them as text so the schema names the error
        return float(value) if math.isfinite(value) else str(value)
    if isinstance(value, dt.date | dt.datetime):
        return value.isoformat()
    return str(value)


def _marked(file: str, e: MarkedYAMLError, rule: str) -> Problem:
    mark = e.problem_mark or e.context_mark
    line, col = (mark.line + 1, mark.column + 1) if mark else (1, 1)
    problem = (e.problem or str(e)).strip()
    if rule == "yaml-duplicate-key" and e.context_mark is not None:
        first = e.context_mark.line + 1
        problem = f"{problem.split(' with value')[0]} (the mapping starts at line {first})"
    elif e.context and e.context_mark is not None and e.context_mark is not mark:
        cm = e.context_mark
        problem = f"{problem} ({e.context.strip()} started at line {cm.line + 1}, column {cm.column + 1})"
    return Problem(file, line, col, rule, problem.replace("\n", " "))


def parse_yaml(file: str, raw: bytes) -> tuple[Document | None, list[Problem]]:
    text, problems = decode(file, raw)
    if text is None:
        return None, problems
    tabs = _tab_problems(file, text)
    if tabs:
        return None, tabs
    try:
        if "&" in text and "*" in text:
            bomb = _alias_bomb(file, text)
            if bomb:
                return None, [bomb]
        tree = _YAML.load(text)
    except MarkedYAMLError as e:
        rule = "yaml-duplicate-key" if "duplicate key" in str(e.problem) else "yaml-syntax"
        return None, [_marked(file, e, rule)]
    except YAMLError as e:
        return None, [Problem(file, 1, 1, "yaml-syntax", str(e).replace("\n", " "))]
    return Document(file, plain(tree), tree), []


def parse_json(file: str, raw: bytes) -> tuple[Document | None, list[Problem]]:
    text, problems = decode(file, raw)
    if text is None:
        return None, problems
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        return None, [Problem(file, e.lineno, e.colno, "json-syntax", e.msg)]
    tree = None
    try:  # JSON is YAML: parse again to know where each value is, and to see duplicate keys
        tree = _YAML.load(text.replace("\t", " "))
    except MarkedYAMLError as e:
        if "duplicate key" in str(e.problem):
            return None, [_marked(file, e, "yaml-duplicate-key")]
    except YAMLError:
        tree = None
    return Document(file, data, tree), []
