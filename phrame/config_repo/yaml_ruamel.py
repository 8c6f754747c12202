"""The reference reader: ruamel.yaml's round-trip parser, for the files the fast reader
(``yaml_events``, libyaml) hands back, and for wording every refusal as it always was.

Called by ``yaml_reading`` only: when libyaml cannot read a file (a syntax error, a
character YAML does not allow), or the file holds what the fast reader does not construct
(merge keys, tags, hex or octal integers, timestamps, duplicate keys, several documents),
or comes near a limit (depth, values, alias growth). Its messages and positions are the
contract of ``fixtures/invalid``. Alias bombs are detected on the event stream, before
anything is expanded. Never raises for bad content.
"""

from __future__ import annotations

import re
import threading
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.composer import Composer, MaxDepthExceededError
from ruamel.yaml.error import MarkedYAMLError, YAMLError
from ruamel.yaml.events import (
    AliasEvent,
    CollectionStartEvent,
    MappingEndEvent,
    ScalarEvent,
    SequenceEndEvent,
)
from ruamel.yaml.reader import ReaderError

from phrame.config_repo.model import Document
from phrame.config_repo.problems import Problem
from phrame.config_repo.scalar_checks import CheckedConstructor, plain, value_problems

# An anchor may be reused, but the expanded document may not grow past this many nodes
# more than it has written out: a few KiB of "billion laughs" would otherwise expand to GiB.
ALIAS_GROWTH_LIMIT = 10
ALIAS_SLACK_NODES = 1000
# Lists and mappings nest at most this deep (config files need < 10): the composer, the
# constructor and plain() recurse, and a few hundred brackets would exhaust Python's stack.
MAX_DEPTH = 64
# A YAML file holds at most this many values (scalars, lists, mappings and aliases, as
# written): config files need hundreds; ruamel takes ~35 µs per value, so a 1 MiB file of
# 250,000 one-character list items would take 10 s to read. Counted while parsing, so the
# read stops at the limit. node.json (placement's, JSON) is not limited.
MAX_VALUES = 20_000
_BIG_ESCAPE = re.compile(r"\\U([0-9A-Fa-f]{8})")
TOO_DEEP = f"nested too deeply: more than {MAX_DEPTH} levels of lists and mappings"


class TooManyValues(Exception):
    def __init__(self, line: int, column: int) -> None:
        super().__init__(f"more than {MAX_VALUES} values")
        self.line, self.column = line, column


def too_many(file: str, line: int, column: int) -> Problem:
    msg = (
        f"the file holds more than {MAX_VALUES} values (list items, keys, aliases); "
        "not read further: split it or shorten its lists"
    )
    return Problem(file, line, column, "file-too-large", msg)


class CountingComposer(Composer):
    """ruamel's composer, stopping once a document has more than ``budget`` nodes."""

    budget: int | None = None
    count = 0

    def __init__(self, *args: Any, **kw: Any) -> None:
        super().__init__(*args, **kw)
        # YAML 1.2 allows an anchor defined again (an alias names the latest): no warning,
        # which would print to stderr per file (and raise where warnings are errors)
        self.warn_double_anchors = False

    def compose_node(self, parent: Any, index: Any) -> Any:
        self.count += 1
        if self.budget is not None and self.count > self.budget:
            mark = self.parser.peek_event().start_mark
            raise TooManyValues(mark.line + 1, mark.column + 1)
        return super().compose_node(parent, index)


def _yaml() -> YAML:
    y = YAML(typ="rt")
    y.Composer = CountingComposer
    y.Constructor = CheckedConstructor
    y.allow_duplicate_keys = False
    y.max_depth = MAX_DEPTH  # checked by the composer, before anything is constructed
    return y


# One parser per thread: a YAML instance keeps its reader, scanner and composer between
# loads, and config-sync parses in several workers at once (one per ref, and reviews).
_PER_THREAD = threading.local()


def _parser() -> YAML:
    y: YAML | None = getattr(_PER_THREAD, "yaml", None)
    if y is None:
        y = _PER_THREAD.yaml = _yaml()
    return y


def load(text: str, *, budget: int | None = MAX_VALUES) -> Any:
    # a %YAML directive sets the version of the parser, not only of its document: a
    # reused parser would read the next files of this thread as YAML 1.1 (``y`` as true)
    y = _parser() if "%YAML" not in text else _yaml()
    # the composer is reused and leaves its depth counter raised when a load fails
    y.composer.depth = 0
    y.composer.count, y.composer.budget = 0, budget
    try:
        return y.load(text)
    except BaseException:
        _forget()
        raise


def _forget() -> None:
    """Drop this thread's parser: a failed load can leave its constructor or parser state
    behind (found by fuzzing: the next file was refused for the last one's error)."""
    _PER_THREAD.yaml = None


def _events(text: str) -> Any:
    y = _parser() if "%YAML" not in text else _yaml()  # as in load
    try:
        yield from y.parse(text)
    except BaseException:
        _forget()
        raise


def _alias_bomb(file: str, text: str) -> Problem | None:
    """Walk the event stream, computing each anchored node's expanded size and height
    (an alias inside an anchored list nests it again: depth multiplies like size)."""
    sizes: dict[str, tuple[int, int]] = {}  # anchor -> (nodes, height) once expanded
    # stack of [anchor, nodes counted so far, height] for open collections
    stack: list[list[Any]] = []
    written = expanded = 0
    for event in _events(text):
        if isinstance(event, ScalarEvent | AliasEvent):
            is_alias = isinstance(event, AliasEvent)
            n, height = sizes.get(event.anchor, (1, 1)) if is_alias else (1, 1)
            written += 1
            if written > MAX_VALUES:
                raise TooManyValues(event.start_mark.line + 1, event.start_mark.column + 1)
            expanded += n
            if not is_alias and event.anchor:
                sizes[event.anchor] = (1, 1)
            if stack:
                stack[-1][1] += n
                stack[-1][2] = max(stack[-1][2], height + 1)
            mark = event.start_mark
            where = (file, mark.line + 1, mark.column + 1, "yaml-alias-bomb")
            if expanded > ALIAS_GROWTH_LIMIT * written + ALIAS_SLACK_NODES:
                msg = (
                    f"alias *{event.anchor} expands the document past {expanded} nodes "
                    f"from {written} written; anchors that multiply are refused"
                )
                return Problem(*where, msg)
            if len(stack) + height > MAX_DEPTH:
                msg = f"alias *{event.anchor} nests the document past {MAX_DEPTH} levels; refused"
                return Problem(*where, msg)
        elif isinstance(event, CollectionStartEvent):
            written += 1
            expanded += 1
            stack.append([event.anchor, 1, 1])
        elif isinstance(event, MappingEndEvent | SequenceEndEvent):
            anchor, n, height = stack.pop()
            if anchor:
                sizes[anchor] = (n, height)
            if stack:
                stack[-1][1] += n
                stack[-1][2] = max(stack[-1][2], height + 1)
    return None


def marked(file: str, e: MarkedYAMLError, rule: str) -> Problem:
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


def too_deep(file: str, e: MarkedYAMLError | None, rule: str) -> Problem:
    mark = e.problem_mark if e is not None else None
    line, col = (mark.line + 1, mark.column + 1) if mark else (1, 1)
    return Problem(file, line, col, rule, TOO_DEEP)


def _unreadable(file: str, text: str, e: ReaderError) -> Problem:
    """A character YAML does not allow: ``position`` counts characters of ``text``."""
    pos = min(max(e.position if isinstance(e.position, int) else 0, 0), len(text))
    line = text.count("\n", 0, pos) + 1
    col = pos - (text.rfind("\n", 0, pos) + 1) + 1
    msg = f"character U+{ord(text[pos]) if pos < len(text) else 0:04X} is not allowed in YAML"
    return Problem(file, line, col, "yaml-syntax", f"{msg} (nor as an escape); remove it")


def _unmarked(file: str, text: str, e: Exception) -> Problem:
    """An error the scanner raised with no place: an escape past U+10FFFF is the one known
    (ruamel calls ``chr()`` on it), so point at the first such escape."""
    beyond = next((m for m in _BIG_ESCAPE.finditer(text) if int(m.group(1), 16) > 0x10FFFF), None)
    pos = beyond.start() if beyond else 0
    line, col = text.count("\n", 0, pos) + 1, pos - (text.rfind("\n", 0, pos) + 1) + 1
    return Problem(file, line, col, "yaml-syntax", f"cannot read: {e}; no character is above U+10FFFF")


def parse_ruamel(file: str, text: str) -> tuple[Document | None, list[Problem]]:
    """``text`` (decoded, with no tab indentation) read by ruamel, as every file was."""
    try:
        if "&" in text and "*" in text:
            bomb = _alias_bomb(file, text)
            if bomb:
                return None, [bomb]
        tree = load(text)
        doc = Document(file, plain(tree), tree)
        return doc, value_problems(doc, tree, syntax_rule="yaml-syntax")
    except TooManyValues as e:
        return None, [too_many(file, e.line, e.column)]
    except MaxDepthExceededError as e:
        return None, [too_deep(file, e, "yaml-syntax")]
    except MarkedYAMLError as e:
        rule = "yaml-duplicate-key" if "duplicate key" in str(e.problem) else "yaml-syntax"
        return None, [marked(file, e, rule)]
    except ReaderError as e:
        return None, [_unreadable(file, text, e)]
    except YAMLError as e:
        return None, [Problem(file, 1, 1, "yaml-syntax", str(e).replace("\n", " "))]
    except RecursionError:  # a nesting the checks above missed: still no traceback
        return None, [too_deep(file, None, "yaml-syntax")]
    except (ValueError, LookupError, TypeError, OverflowError) as e:  # the scanner's, unmarked
        return None, [_unmarked(file, text, e)]
