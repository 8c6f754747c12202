"""Semantic versions and the ranges an ``images:`` policy allows (npm/Cargo syntax), purely.

Called by :mod:`phrame.config_repo.image_policy` (its validation and its choice of a tag).
A tag is a version when it reads ``[v]MAJOR[.MINOR[.PATCH]][-PRERELEASE][+BUILD]``; a
missing minor or patch counts as 0. A range is comparators joined by spaces (all must hold),
alternatives by ``||``: ``1.2.3`` or ``=1.2.3``, ``>``, ``>=``, ``<``, ``<=``, ``^1.2``
(same leftmost non-zero part), ``~1.4.0`` (same minor; ``~1`` same major), ``1.x`` /
``1.2.*``, ``*``. A pre-release tag is allowed only by a range whose comparator names a
pre-release of the same ``MAJOR.MINOR.PATCH`` (as npm does). Never raises but ``RangeError``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import total_ordering

VERSION = re.compile(
    r"^v?(?P<major>0|[1-9]\d*)(?:\.(?P<minor>0|[1-9]\d*)(?:\.(?P<patch>0|[1-9]\d*))?)?"
    r"(?:-(?P<pre>[0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*))?(?:\+[0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*)?$"
)
PARTIAL = re.compile(
    r"^v?(?P<major>\d+|[xX*])(?:\.(?P<minor>\d+|[xX*])(?:\.(?P<patch>\d+|[xX*]))?)?"
    r"(?:-(?P<pre>[0-9A-Za-z.-]+))?$"
)
OPERATOR = re.compile(r"^(\^|~|>=|<=|>|<|=)?\s*(.+)$")
WILD = ("x", "X", "*")


class RangeError(ValueError):
    """A range that cannot be read; the message says which part."""


@total_ordering
@dataclass(frozen=True)
class Version:
    major: int
    minor: int
    patch: int
    pre: tuple[int | str, ...] = ()

    @property
    def core(self) -> tuple[int, int, int]:
        return (self.major, self.minor, self.patch)

    def _key(self) -> tuple[tuple[int, int, int], int, tuple[tuple[int, int | str], ...]]:
        # a release sorts after its pre-releases; numeric identifiers before alphanumeric ones
        pre = tuple((0, p) if isinstance(p, int) else (1, p) for p in self.pre)
        return (self.core, 0 if self.pre else 1, pre)

    def __lt__(self, other: object) -> bool:
        if not isinstance(other, Version):
            return NotImplemented
        return self._key() < other._key()


def parse_version(tag: str) -> Version | None:
    """The version a tag reads as, or None (``latest``, ``1.2.3.4``, ``01.2``)."""
    m = VERSION.match(tag)
    if m is None:
        return None
    pre = tuple(int(p) if p.isdigit() else p for p in m["pre"].split(".")) if m["pre"] else ()
    return Version(int(m["major"]), int(m["minor"] or 0), int(m["patch"] or 0), pre)


@dataclass(frozen=True)
class Comparator:
    op: str  # one of < <= > >= =
    version: Version
    names_pre: bool = False  # written with a pre-release (not a bound this module made up)

    def holds(self, v: Version) -> bool:
        w = self.version
        return {
            "<": v < w,
            "<=": v <= w,
            ">": v > w,
            ">=": v >= w,
            "=": v == w,
        }[self.op]


@dataclass(frozen=True)
class Range:
    text: str
    alternatives: tuple[tuple[Comparator, ...], ...]

    def allows(self, v: Version) -> bool:
        return any(_all_hold(set_, v) for set_ in self.alternatives)


def _all_hold(comparators: tuple[Comparator, ...], v: Version) -> bool:
    if not all(c.holds(v) for c in comparators):
        return False
    if not v.pre:
        return True
    return any(c.names_pre and c.version.core == v.core for c in comparators)


def parse_range(text: str) -> Range:
    """``RangeError`` naming the part that is not a comparator."""
    if not text.strip():
        raise RangeError("an empty range (write '*' for any version)")
    alternatives = []
    for alternative in text.split("||"):
        parts = _join_operators(alternative.split())
        if not parts:
            raise RangeError(f"an empty alternative in {text!r}")
        comparators: list[Comparator] = []
        for part in parts:
            comparators += _comparators(part)
        alternatives.append(tuple(comparators))
    return Range(text, tuple(alternatives))


def _join_operators(words: list[str]) -> list[str]:
    """``>= 1.0`` written with a space is one comparator."""
    out: list[str] = []
    for word in words:
        if out and out[-1] in ("^", "~", ">=", "<=", ">", "<", "="):
            out[-1] += word
        else:
            out.append(word)
    return out


def _comparators(part: str) -> list[Comparator]:
    m = OPERATOR.match(part)
    assert m is not None  # ".+" matches any non-empty word
    op, rest = m[1] or "", m[2]
    p = PARTIAL.match(rest)
    if p is None:
        raise RangeError(f"{part!r} is not a version comparator (such as ^1.2, ~1.4.0, >=1.0, 1.x)")
    nums = [p["major"], p["minor"], p["patch"]]
    # the parts given before the first wildcard or gap
    given: list[int] = []
    for n in nums:
        if n is None or n in WILD:
            break
        given.append(int(n))
    pre = tuple(int(x) if x.isdigit() else x for x in p["pre"].split(".")) if p["pre"] else ()
    if pre and len(given) < 3:
        raise RangeError(f"{part!r}: a pre-release needs a full MAJOR.MINOR.PATCH")
    full = [*given, 0, 0, 0]
    low = Version(full[0], full[1], full[2], pre)
    if not given:
        if op in ("<", ">"):
            return [Comparator("<", Version(0, 0, 0, (0,)))]  # nothing: "<*"
        return []  # "*", ">=*": any release
    named = bool(pre)
    if op in ("", "="):
        if len(given) == 3:
            return [Comparator("=", low, named)]
        return [Comparator(">=", low), Comparator("<", _bump(given, len(given) - 1))]
    if op == "^":
        index = next((i for i, n in enumerate(given) if n != 0), len(given) - 1)
        return [Comparator(">=", low, named), Comparator("<", _bump(given, index))]
    if op == "~":
        index = 0 if len(given) == 1 else 1
        return [Comparator(">=", low, named), Comparator("<", _bump(given, index))]
    if op == ">":
        if len(given) < 3:
            return [Comparator(">=", _bump(given, len(given) - 1))]
        return [Comparator(">", low, named)]
    if op == "<=":
        if len(given) < 3:
            return [Comparator("<", _bump(given, len(given) - 1))]
        return [Comparator("<=", low, named)]
    return [Comparator(op, low, named)]  # ">=", "<"


def _bump(given: list[int], index: int) -> Version:
    """The first version past ``given`` at part ``index`` (1.2 at 0 -> 2.0.0-0): below every
    pre-release of that next version too."""
    parts = [*given, 0, 0, 0][:3]
    parts[index] += 1
    for i in range(index + 1, 3):
        parts[i] = 0
    return Version(parts[0], parts[1], parts[2], (0,))
