"""What a scalar of a config file means: YAML 1.2 core, as ruamel.yaml read it before.

Called by ``yaml_events`` for each scalar libyaml reports. libyaml's own resolver (PyYAML's)
is YAML 1.1 (``yes``/``on`` booleans, ``0755`` octal, ``1:20`` sexagesimal): it is never
used. Quoted and block scalars are text; a plain scalar is ``null``/``~``/empty (null),
``true``/``false`` in three spellings (boolean), a decimal integer, a decimal float, a
``YYYY-MM-DD`` date, or text. Whatever else ruamel's 1.2 resolver would have turned into a
non-text value (hex, octal, ``1_000``, ``.inf``, timestamps with a time, ``<<`` merges,
explicit tags other than ``!!str``) raises :class:`Fallback`: the caller reads that file
with ruamel, so its meaning and its errors stay exactly what they were. Never guesses.
"""

from __future__ import annotations

import datetime as dt
import math
import re
from typing import Any

from phrame.config_repo.scalar_checks import MAX_INT_DIGITS

STR_TAG = "tag:yaml.org,2002:str"
_TRUE = frozenset(("true", "True", "TRUE"))
_FALSE = frozenset(("false", "False", "FALSE"))
_NULL = frozenset(("~", "null", "Null", "NULL"))
_INT = re.compile(r"[-+]?(?:0|[1-9][0-9]*)")
_FLOAT = re.compile(r"[-+]?[0-9]+(?:\.[0-9]*(?:[eE][-+]?[0-9]+)?|[eE][-+]?[0-9]+)")
_DATE = re.compile(r"([0-9]{4})-([0-9]{2})-([0-9]{2})")
# ruamel's YAML 1.2 forms of int, float and timestamp (resolver.py), in one: a plain scalar
# matching it but none of the fast forms above is read by ruamel
_RUAMEL_NUMBER = re.compile(
    r"""[-+]?0b[0-1_]+|[-+]?0o?[0-7_]+|[-+]?[0-9_]+|[-+]?0x[0-9a-fA-F_]+
    |[-+]?[0-9][0-9_]*\.[0-9_]*(?:[eE][-+]?[0-9]+)?|[-+]?[0-9][0-9_]*[eE][-+]?[0-9]+
    |[-+]?\.[0-9_]+(?:[eE][-+][0-9]+)?|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN)
    |[0-9]{4}-[0-9]{1,2}-[0-9]{1,2}(?:(?:[Tt]|[ \t]+)[0-9].*)?""",
    re.X,
)
# what YAML 1.1 (PyYAML, and YAML's old spec) reads as a boolean, and 1.2 as text
YAML11_BOOLEANS = frozenset(
    ["y", "Y", "yes", "Yes", "YES", "n", "N", "no", "No", "NO", "on", "On", "ON", "off", "Off", "OFF"]
)


class Fallback(Exception):
    """This file needs ruamel's reading (a form the fast reader does not construct); the
    argument names why (``"alias"``, ``"<<"``, a tag, ``"libyaml: ..."``)."""

    @property
    def reason(self) -> str:
        return str(self.args[0]) if self.args else "unnamed"


def plain_scalar(value: str) -> Any:
    """A plain (unquoted, untagged) scalar under YAML 1.2 core."""
    if not value:
        return None
    first = value[0]
    if first in "tTfF":
        if value in _TRUE:
            return True
        if value in _FALSE:
            return False
    elif first in "~nN" and value in _NULL:
        return None
    elif first in "-+0123456789.":
        return _number(value)
    elif first in "<=" and value in ("<<", "="):
        raise Fallback(value)
    return value


def _number(value: str) -> Any:
    if _INT.fullmatch(value):
        if len(value.lstrip("+-")) > MAX_INT_DIGITS:
            raise Fallback("long integer")  # ruamel's reading refuses it, with the place
        return int(value)
    if _FLOAT.fullmatch(value):
        number = float(value)
        if not math.isfinite(number):
            raise Fallback(value)
        return number
    date = _DATE.fullmatch(value)
    if date:
        try:
            return dt.date(int(date[1]), int(date[2]), int(date[3]))
        except ValueError:
            raise Fallback(value) from None
    if _RUAMEL_NUMBER.fullmatch(value):
        raise Fallback(value)
    return value


def scalar(value: str, tag: str | None, style: str | None) -> Any:
    """A scalar event's value: tagged ``!!str`` or quoted/block is text; plain is resolved."""
    if tag is not None:
        if tag == STR_TAG:
            return value
        raise Fallback(tag)
    if style:
        return value
    return plain_scalar(value)
