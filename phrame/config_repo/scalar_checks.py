"""What a parsed file may hold beyond what its JSON Schema says: readable integers, text keys,
and strings that UTF-8 can encode and that carry no control characters.

Called by ``yaml_reading`` while it parses (integers) and right after (keys and strings).
Escapes let a file hold what it could not hold raw (``"\\ud800"``, ``"\\e"``, ``0xfff…``);
whatever render cannot encode or a terminal would obey must be refused here, with the place,
never found later as a traceback. Never raises for bad content.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import math
from typing import Any

from ruamel.yaml.constructor import ConstructorError, RoundTripConstructor
from ruamel.yaml.nodes import MappingNode
from ruamel.yaml.scalarbool import ScalarBoolean

from phrame.config_repo.model import Document, PathPart
from phrame.config_repo.problems import NOT_TEXT, Problem, escape_non_text
from schemas.registry import pointer

# Python converts at most 4,300 digits between int and str by default, and can be set as
# low as 640: longer integers are refused whatever the setting (quote them to make text).
MAX_INT_DIGITS = 640
_TOO_BIG = 10**MAX_INT_DIGITS
_KINDS = {"int": "integer", "float": "number", "bool": "boolean", "timestamp": "date or time"}
_BASES = {"0x": (16, "hexadecimal "), "0o": (8, "octal "), "0b": (2, "binary ")}


def printable_path(path: str) -> str | None:
    """``path`` with what is no text escaped (undecodable bytes as ``\\xff``, control
    characters as ``\\x1b``), or None when it is text already."""
    if NOT_TEXT.search(path) is None:
        return None
    return escape_non_text(path.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace"))


def _too_long(what: str, note: str = "") -> str:
    return f"integer of {what}: at most {MAX_INT_DIGITS} digits are read{note}; quote it if it is text"


class CheckedConstructor(RoundTripConstructor):
    """ruamel's round-trip constructor, refusing with a place what it would otherwise turn
    into an unmarked ValueError: an integer too long to convert (or one ``str()`` cannot
    print), or any scalar that is not what its form or tag says (``9999-99-99``)."""

    def construct_yaml_int(self, node: Any) -> Any:
        text = str(node.value).replace("_", "").lstrip("+-")
        base, kind = _BASES.get(text[:2], (10, ""))
        digits = text[2:] if base != 10 else text
        if base == 10 and len(digits) > MAX_INT_DIGITS:
            raise ConstructorError(problem=_too_long(f"{len(digits)} digits"), problem_mark=node.start_mark)
        # other bases are powers of two: int() converts any length, but str() would not
        if base != 10 and int(digits or "0", base) >= _TOO_BIG:
            msg = _too_long(f"{len(digits)} {kind}digits", " (counted in decimal)")
            raise ConstructorError(problem=msg, problem_mark=node.start_mark)
        return super().construct_yaml_int(node)

    def construct_document(self, node: Any) -> Any:
        """ruamel's, closing on a failure the generators it leaves suspended: those for
        unknown tags (``!!str`` on a mapping) catch everything at their yield, GeneratorExit
        included, and then raise, so one left to the collector raises again on whatever
        thread collects ("Exception ignored in ...")."""
        running: list[Any] = []
        try:
            data = self.construct_object(node)
            while self.state_generators:
                running, self.state_generators = self.state_generators, []
                while running:
                    for _ in running[0]:
                        pass
                    running.pop(0)
        except BaseException:
            pending, self.state_generators = [*running, *self.state_generators], []
            for generator in pending:
                with contextlib.suppress(Exception):
                    generator.close()
            raise
        self.constructed_objects = {}
        self.recursive_objects = {}
        self.deep_construct = False
        return data

    def construct_object(self, node: Any, deep: bool = False) -> Any:
        try:
            return super().construct_object(node, deep=deep)
        except (ValueError, LookupError, TypeError, OverflowError) as e:
            # a scalar its resolver or an explicit tag chose a type for, that is none
            # (9999-99-99, !!int abc, 0x_): innermost node first, so this is the place
            kind = node.tag.rsplit(":", 1)[-1]
            shown = str(node.value)[:40] if isinstance(node.value, str) else kind
            msg = f"{shown!r} is no valid {_KINDS.get(kind, kind)} ({e}); quote it if it is text"
            raise ConstructorError(problem=msg, problem_mark=node.start_mark) from None
        except AttributeError as e:  # ruamel merging (``<<``) a set as if it were a mapping
            # (a mapping's own construction raising it is its merge: the only call on values)
            merges = isinstance(node, MappingNode)
            what = "a merge (<<) must name a mapping or a list of mappings" if merges else "cannot be read"
            raise ConstructorError(problem=f"{what} ({e})", problem_mark=node.start_mark) from None


CheckedConstructor.add_constructor("tag:yaml.org,2002:int", CheckedConstructor.construct_yaml_int)


def plain(value: Any) -> Any:
    """Values as read (ruamel round-trip objects, or the fast reader's values with their
    non-text keys and dates) → plain JSON-like data."""
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [plain(v) for v in value]
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, ScalarBoolean):  # an anchored true/false: an int subclass in ruamel
        return bool(value)
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        # .inf/.nan have no JSON form: keep them as text so the schema names the error
        return float(value) if math.isfinite(value) else str(value)
    if isinstance(value, dt.date | dt.datetime):
        return value.isoformat()
    return str(value)


def json_int(text: str) -> int:
    """``parse_int`` for ``json.loads``: the same limit (ValueError, placed by the caller)."""
    if len(text.lstrip("-")) > MAX_INT_DIGITS:
        raise ValueError(_too_long(f"{len(text.lstrip('-'))} digits"))
    return int(text)


def _key_words(key: Any) -> tuple[str, str]:
    """How a non-text key is spelled in YAML, and what it was read as."""
    if isinstance(key, bool):
        return ("true" if key else "false"), "a boolean"
    if key is None:
        return "null", "null"
    if isinstance(key, int):
        return str(key), "an integer"
    if isinstance(key, float):
        return str(key), "a number"
    if isinstance(key, dt.date | dt.datetime):
        return key.isoformat(), "a date"
    if isinstance(key, tuple | list):
        return repr(str(key))[:40], "a list"
    return repr(str(key))[:40], f"a {type(key).__name__}"


def _char_message(char: str, what: str) -> tuple[str, bool]:
    """A message for a character that is no text, and whether UTF-8 cannot encode it."""
    cp = ord(char)
    if 0xD800 <= cp <= 0xDFFF:
        msg = (
            f'{what} holds U+{cp:04X}, a lone surrogate (from an escape such as "\\u{cp:04x}") '
            "that UTF-8 cannot encode; write the character itself"
        )
        return msg, True
    kind = "a noncharacter" if cp in (0xFFFE, 0xFFFF) else "a control character"
    msg = f"{what} holds U+{cp:04X}, {kind}; only tab, line feed and carriage return may appear in text"
    return msg, False


class _Checker:
    def __init__(self, doc: Document, syntax_rule: str) -> None:
        self.doc, self.syntax_rule = doc, syntax_rule
        self.problems: list[Problem] = []

    def add(self, path: list[PathPart], rule: str, message: str, *, key: bool = False) -> None:
        line, col = self.doc.position(path, key=key)
        self.problems.append(Problem(self.doc.file, line, col, rule, message, pointer(path)))

    def text(self, value: str, path: list[PathPart], *, key: bool = False) -> None:
        # YAML 1.2's printable characters are what the reader takes raw: escapes add no more
        bad = NOT_TEXT.search(value)
        if bad is not None:
            msg, is_encoding = _char_message(bad.group(), "key" if key else "text")
            self.add(path, "yaml-encoding" if is_encoding else self.syntax_rule, msg, key=key)

    def key(self, key: Any, path: list[PathPart]) -> None:
        if isinstance(key, str):
            self.text(key, path, key=True)
            return
        spelled, kind = _key_words(key)
        msg = f"key {spelled} is read as {kind}, not text; keys are names: quote it ('{spelled}')"
        self.add(path, "schema", msg, key=True)


def value_problems(doc: Document, root: Any, *, syntax_rule: str) -> list[Problem]:
    """Problems of the keys and strings in ``root`` (the ruamel tree of a YAML file, which
    keeps key types; the data of a JSON file). Aliased nodes are checked once."""
    check = _Checker(doc, syntax_rule)
    seen: set[int] = set()
    stack: list[tuple[Any, list[PathPart]]] = [(root, [])]
    while stack:
        value, path = stack.pop()
        if isinstance(value, dict | list):
            if id(value) in seen:
                continue
            seen.add(id(value))
            if isinstance(value, dict):
                for key, child in value.items():
                    check.key(key, [*path, key])
                    stack.append((child, [*path, key]))
            else:
                stack += [(child, [*path, i]) for i, child in enumerate(value)]
        elif value is not None and not isinstance(value, bool | int | float | dt.date):
            check.text(str(value), path)  # str(): tagged scalars become text in plain() too
    return check.problems
