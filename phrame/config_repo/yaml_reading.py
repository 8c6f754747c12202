"""Parsing one YAML (or JSON) file into a Document, refusing the hazards first.

Called by ``loader`` (every file of a config repo) and ``phrame.compose.reading``. Two readers,
one contract: libyaml's C parser composed by ``yaml_events`` reads every file it can, with
YAML 1.2 core scalars (``yaml_scalars``); ruamel.yaml (``yaml_ruamel``) reads the files the
fast reader declines with a named reason (logged at debug) and words every refusal, so rule
names, messages and positions are what they always were. Nothing else falls back.
Hazards are refused with a Problem, never a traceback: non-UTF-8 bytes, tab indentation,
syntax errors, duplicate keys, nesting deeper than MAX_DEPTH, alias/anchor expansion
bombs (refused before anything is expanded), more than MAX_VALUES values, and what
``scalar_checks`` refuses (integers too long to convert, non-text keys, unencodable or
control characters). Never expands an alias while reading.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from ruamel.yaml.composer import MaxDepthExceededError
from ruamel.yaml.error import MarkedYAMLError, YAMLError

from phrame.config_repo.model import Document
from phrame.config_repo.problems import Problem
from phrame.config_repo.scalar_checks import MAX_INT_DIGITS, json_int, plain, value_problems
from phrame.config_repo.yaml_events import Composed, compose
from phrame.config_repo.yaml_ruamel import (
    ALIAS_GROWTH_LIMIT,
    ALIAS_SLACK_NODES,
    MAX_DEPTH,
    MAX_VALUES,
    TooManyValues,
    load,
    marked,
    parse_ruamel,
    too_deep,
    too_many,
)
from phrame.config_repo.yaml_scalars import Fallback

__all__ = ["MAX_DEPTH", "MAX_VALUES", "decode", "parse_json", "parse_yaml", "plain"]
log = logging.getLogger(__name__)


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
    if "\t" not in text:
        return []
    problems = []
    for n, line in enumerate(text.splitlines(), start=1):
        indent = line[: len(line) - len(line.lstrip(" \t"))]
        if "\t" in indent:
            col = indent.index("\t") + 1
            msg = "tab used for indentation; YAML allows only spaces"
            problems.append(Problem(file, n, col, "yaml-tab", msg))
    return problems


def _fast(file: str, text: str, max_values: int | None) -> Composed | None:
    """libyaml's reading, or None where the fast reader names a reason not to take the file
    (``yaml_events``): ruamel reads it. Any other exception is a bug of the fast reader and
    propagates: hidden behind ruamel's reading it would never be seen."""
    try:
        # half the slack: a file near ruamel's alias limit is refused by ruamel, in its words
        slack = ALIAS_SLACK_NODES // 2
        return compose(
            text, max_values=max_values, max_depth=MAX_DEPTH, growth=ALIAS_GROWTH_LIMIT, slack=slack
        )
    except Fallback as e:
        log.debug("%s: read with ruamel.yaml, the fast reader does not take it (%s)", file, e.reason)
        return None


def parse_yaml(file: str, raw: bytes) -> tuple[Document | None, list[Problem]]:
    text, problems = decode(file, raw)
    if text is None:
        return None, problems
    tabs = _tab_problems(file, text)
    if tabs:
        return None, tabs
    # libyaml takes a tab where YAML allows one (``a:<tab>b``); ruamel refused some of
    # those: a file with a tab anywhere is read by ruamel, so it is refused as before
    try:
        composed = _fast(file, text, MAX_VALUES) if "\t" not in text else None
    except TooManyValues as e:  # refused here, so a hostile file is not read twice
        return None, [too_many(file, e.line, e.column)]
    if composed is None:
        return parse_ruamel(file, text)
    if not composed.needs_check:
        return Document(file, composed.value, composed.marks), []
    # a non-text key, a date, an alias (shared objects: copied, as ruamel's reading did)
    # or an escape: checked on the values as read, then made plain JSON-like data
    doc = Document(file, None, composed.marks)
    problems = value_problems(doc, composed.value, syntax_rule="yaml-syntax")
    doc.data = plain(composed.value)
    return doc, problems


def parse_json(file: str, raw: bytes) -> tuple[Document | None, list[Problem]]:
    text, problems = decode(file, raw)
    if text is None:
        return None, problems
    is_too_deep = False
    data = None
    try:
        data = json.loads(text, parse_int=json_int)
    except json.JSONDecodeError as e:
        return None, [Problem(file, e.lineno, e.colno, "json-syntax", e.msg)]
    except ValueError as e:  # an integer too long: the YAML reading below knows where it is
        return None, [_placed(file, text, str(e))]
    except RecursionError:
        is_too_deep = True
    is_too_deep = is_too_deep or _deeper_than(data, MAX_DEPTH)
    composed = None if is_too_deep else _fast(file, text.replace("\t", " "), None)
    tree: Any = None
    if composed is not None:
        tree = composed.marks
    else:
        tree, problem = _json_positions(file, text, is_too_deep)
        if problem is not None:
            return None, [problem]
    if is_too_deep:  # and YAML gave no position for it
        return None, [too_deep(file, None, "json-syntax")]
    doc = Document(file, data, tree)
    return doc, value_problems(doc, data, syntax_rule="json-syntax")


def _deeper_than(data: Any, limit: int) -> bool:
    """Whether values nest more than ``limit`` deep, counted as the YAML composer does
    (the top value is level 1, a scalar counts as a level), without recursion."""
    stack = [(data, 1)]
    while stack:
        value, depth = stack.pop()
        if depth > limit:
            return True
        if isinstance(value, dict | list):
            children = value.values() if isinstance(value, dict) else value
            stack.extend((child, depth + 1) for child in children)
    return False


def _json_positions(file: str, text: str, too_deep_already: bool) -> tuple[Any, Problem | None]:
    """ruamel's tree of a JSON file (positions, duplicate keys), or the problem it shows."""
    try:  # JSON is YAML: parse again to know where each value is, and to see duplicate keys
        return load(text.replace("\t", " "), budget=None), None
    except MaxDepthExceededError as e:
        return None, too_deep(file, e, "json-syntax")
    except MarkedYAMLError as e:
        if "duplicate key" in str(e.problem) and not too_deep_already:
            return None, marked(file, e, "yaml-duplicate-key")
    except (YAMLError, RecursionError, ValueError, LookupError, TypeError, OverflowError):
        pass  # json.loads read it: positions are lost, nothing else
    return None, None


def _placed(file: str, text: str, message: str) -> Problem:
    """``message`` at the place the YAML reader stops (it refuses the same integer)."""
    try:
        load(text.replace("\t", " "), budget=None)
    except MarkedYAMLError as e:
        mark = e.problem_mark
        if mark is not None and f"at most {MAX_INT_DIGITS} digits" in str(e.problem):
            return Problem(file, mark.line + 1, mark.column + 1, "json-syntax", message)
    except (YAMLError, RecursionError):
        pass
    return Problem(file, 1, 1, "json-syntax", message)
