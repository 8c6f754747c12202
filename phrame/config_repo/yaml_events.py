"""The fast reader: libyaml's C parser (PyYAML's ``CSafeLoader``) → values and their marks.

Called by ``yaml_reading`` for every YAML file (and JSON, for positions). libyaml scans and
parses in C; this module composes its events itself, iteratively, because PyYAML's C
composer builds the whole node graph (two mark objects per node) before anything can be
counted, so a 1 MiB file of 250,000 values would be composed whole before its refusal;
composing the events here stops at the limit and, measured on the 2,058 files of
benchmarks/validate_render.py, reading the events costs less than ``yaml.compose``
(0.07 s against 0.10 s) before the values are built. Composition here never
expands an alias (an alias is the same Python object again) and stops short of every limit
the ruamel reader enforces (depth, values, alias growth), raising :class:`Fallback` so the
caller reads that file with ruamel, which words the refusal as before. Anything this
reader does not construct itself (merge keys, non-text tags, duplicate or complex keys,
several documents, ``%YAML`` directives) falls back the same way, and so does a file
libyaml cannot read (its ``yaml.YAMLError``: ruamel words the syntax error). Each
``Fallback`` names its reason. It raises nothing else on purpose but ``TooManyValues``
(ruamel's, with the same place) for a file without aliases holding more than it may:
any other exception is a bug here and reaches the caller.

Marks: a scalar's are ``(line, column)``; a list's ``(line, column, [item marks])``; a
mapping's ``(line, column, {key as read: (key line, key column, value marks)})``; 0-based.
"""

from __future__ import annotations

import logging
from typing import Any

import yaml
from yaml.events import (
    AliasEvent,
    DocumentEndEvent,
    DocumentStartEvent,
    MappingEndEvent,
    MappingStartEvent,
    ScalarEvent,
    SequenceEndEvent,
    SequenceStartEvent,
    StreamEndEvent,
)

from phrame.config_repo.problems import NOT_TEXT
from phrame.config_repo.yaml_ruamel import TooManyValues
from phrame.config_repo.yaml_scalars import Fallback, plain_scalar, scalar

log = logging.getLogger(__name__)
# PyYAML's wheels ship the C extension; without it this reader is no faster than ruamel,
# so every file is read by ruamel instead (same results), with one warning
CParser: Any = getattr(yaml, "CSafeLoader", None)
if CParser is None:  # pragma: no cover - depends on how PyYAML was built
    log.warning("PyYAML has no libyaml (yaml.CSafeLoader): config files are read with ruamel.yaml, slowly")

_FAST = (str, int, float, bool, type(None))
_MAP_TAGS, _SEQ_TAGS = (None, "tag:yaml.org,2002:map"), (None, "tag:yaml.org,2002:seq")
_NO_KEY = object()


class Composed:
    """A composed document: ``value`` (keys as read), ``marks``, and whether ``value`` holds
    something the caller must convert or check (a non-text key, a date, a double-quoted
    string with an escape that may be no text)."""

    __slots__ = ("marks", "needs_check", "value")

    def __init__(self, value: Any, marks: Any, needs_check: bool) -> None:
        self.value, self.marks, self.needs_check = value, marks, needs_check


class _Frame:
    __slots__ = ("anchor", "children", "height", "is_list", "key", "key_mark", "marks", "size", "value")

    def __init__(self, value: Any, children: Any, line: int, column: int, anchor: str | None) -> None:
        self.value, self.children, self.anchor = value, children, anchor
        self.is_list = type(value) is list
        self.marks = (line, column, children)
        self.key: Any = _NO_KEY
        self.key_mark = (0, 0)
        self.size, self.height = 1, 1


def _too_many(aliases: bool, mark: Any) -> None:
    if aliases:
        raise Fallback("size")
    raise TooManyValues(mark.line + 1, mark.column + 1)


def compose(text: str, *, max_values: int | None, max_depth: int, growth: int, slack: int) -> Composed:
    """The one document of ``text``; ``Fallback`` where ruamel must read it instead."""
    if CParser is None:
        raise Fallback("no libyaml")
    parser = CParser(text)
    try:
        # without an anchor there is no alias: sizes and heights need no counting
        track = "&" in text
        return _compose(parser.get_event, max_values, max_depth, growth, slack, track, track and "*" in text)
    except yaml.YAMLError as e:  # a syntax error: ruamel's reading words it, with its place
        problem = getattr(e, "problem", None) or type(e).__name__
        raise Fallback(f"libyaml: {problem}") from e
    finally:
        parser.dispose()


def _compose(
    get: Any, max_values: int | None, max_depth: int, growth: int, slack: int, track: bool, aliases: bool
) -> Composed:
    get()  # StreamStartEvent
    event = get()
    if type(event) is StreamEndEvent:  # empty, or only comments
        return Composed(None, None, False)
    if type(event) is not DocumentStartEvent or event.version is not None or event.tags:
        raise Fallback("directive")
    # stop short of ruamel's limits: a file near one is read by ruamel, which refuses it
    # with its own words and place (counts here are the same, the margin is for safety).
    # Too many values is refused here, at the value ruamel's composer stopped at, unless
    # the file has aliases (ruamel's alias pass counts those, and stops elsewhere)
    budget = 1 << 62 if max_values is None else max_values - 2 if aliases else max_values
    depth_limit, written, expanded = max_depth - 2, 0, 0
    anchors: dict[str, tuple[Any, Any, int, int]] = {}
    stack: list[_Frame] = []
    needs_check = False
    root: Any = _NO_KEY
    root_marks: Any = None
    frame: Any = None
    while True:
        event = get()
        kind = type(event)
        size = height = 1
        if kind is ScalarEvent:
            mark = event.start_mark
            marks: Any = (mark.line, mark.column)
            text, style = event.value, event.style
            if event.tag is not None:
                value = scalar(text, event.tag, style)
            elif style:  # quoted or block: text; only an escape can make what is no text
                value = text
                if style == '"' and NOT_TEXT.search(text):
                    needs_check = True
            else:
                value = plain_scalar(text)
            if type(value) not in _FAST:
                needs_check = True  # a date (or a key that is no text): made plain by the caller
            if event.anchor is not None:
                anchors[event.anchor] = (value, marks, 1, 1)
        elif kind is AliasEvent:
            found = anchors.get(event.anchor)
            if found is None:  # undefined, or its own collection still open (recursive)
                raise Fallback("alias")
            value, marks, size, height = found
            needs_check = True  # the caller copies shared values, as ruamel's reading did
            if len(stack) + height > depth_limit:
                raise Fallback("alias depth")
        elif kind is MappingStartEvent or kind is SequenceStartEvent:
            written += 1
            expanded += 1
            is_map = kind is MappingStartEvent
            mark = event.start_mark
            if written > budget:
                _too_many(aliases, mark)
            if len(stack) >= depth_limit:
                raise Fallback("depth")
            if event.tag not in (_MAP_TAGS if is_map else _SEQ_TAGS):
                raise Fallback(f"collection tag {event.tag}")  # ``!!map [..]`` is ruamel's to refuse
            frame = _Frame(*(({}, {}) if is_map else ([], [])), mark.line, mark.column, event.anchor)
            stack.append(frame)
            continue
        elif kind is MappingEndEvent or kind is SequenceEndEvent:
            done = stack.pop()
            value, marks = done.value, done.marks
            if done.anchor is not None:
                anchors[done.anchor] = (value, marks, done.size, done.height)
            frame = stack[-1] if stack else None
            if frame is not None and track:
                frame.size += done.size
                if done.height >= frame.height:
                    frame.height = done.height + 1
            size = 0  # counted in the parent as they came
        elif kind is DocumentEndEvent:
            if type(get()) is not StreamEndEvent:
                raise Fallback("several documents")
            return Composed(root, root_marks, needs_check)
        else:  # pragma: no cover - libyaml emits no other event inside a document
            raise Fallback(kind.__name__)
        if size:  # a scalar or an alias: one value written, ``size`` once expanded
            written += 1
            if written > budget:
                _too_many(aliases, event.start_mark)
            if track:
                expanded += size
                if expanded > growth * written + slack:
                    raise Fallback("size")
                if frame is not None:
                    frame.size += size
                    if height >= frame.height:
                        frame.height = height + 1
        if frame is None:
            root, root_marks = value, marks
        elif frame.is_list:
            frame.value.append(value)
            frame.children.append(marks)
        elif frame.key is _NO_KEY:
            if isinstance(value, dict | list) or value in frame.value:
                raise Fallback("complex or duplicate key")
            if type(value) is not str:
                needs_check = True
            frame.key, frame.key_mark = value, marks
        else:
            key = frame.key
            frame.value[key] = value
            frame.children[key] = (*frame.key_mark, marks)
            frame.key = _NO_KEY
