"""Deploy freezes, purely: cron expressions, windows, and whether an instant is frozen.

An environment's ``freeze:`` lists windows: recurring ones (a five-field cron expression
read in an IANA time zone, each match starting a window of ``duration_h`` hours, as
GitLab's freeze periods) and one-off ones (``from``/``to``, RFC 3339). :func:`parse_cron`
and :func:`windows_of` raise :class:`FreezeError` with what is wrong (the validation rules
in :mod:`phrame.config_repo.rules` turn that into problems at file:line); :func:`frozen_until`
and :func:`next_start` answer for an instant (epoch seconds). No clock, no I/O. Local times
are turned into instants by ``zoneinfo``: a start in a spring-forward gap is read with the
offset before the change, an ambiguous one (autumn) as its first occurrence.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError, available_timezones

MONTHS = ("JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC")
DAYS = ("SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT")
# (name, lowest, highest, names for lowest..)
_FIELDS = (
    ("minute", 0, 59, ()),
    ("hour", 0, 23, ()),
    ("day of month", 1, 31, ()),
    ("month", 1, 12, MONTHS),
    ("day of week", 0, 7, DAYS),  # 7 is Sunday too
)
SEARCH_DAYS = 366 * 8  # how far ahead a next start is looked for (a 29 February comes within 8 years)
_DIGITS = re.compile(r"^[0-9]{1,9}$")  # ASCII digits only (str.isdigit takes '²' and '٣')
_RFC3339 = re.compile(r"^\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$")


class FreezeError(ValueError):
    """A freeze window that cannot be read: the message says what and how to write it."""


@dataclass(frozen=True)
class Cron:
    minutes: frozenset[int]
    hours: frozenset[int]
    days: frozenset[int]  # of the month
    months: frozenset[int]
    weekdays: frozenset[int]  # 0 Sunday .. 6 Saturday
    any_day: bool  # day of month was ``*``
    any_weekday: bool  # day of week was ``*``

    def matches_day(self, day: date) -> bool:
        """Cron's rule: with both day fields restricted, either one matching is enough."""
        if day.month not in self.months:
            return False
        in_month = day.day in self.days
        in_week = (day.isoweekday() % 7) in self.weekdays
        if self.any_day or self.any_weekday:
            return in_month and in_week
        return in_month or in_week


def _value(text: str, low: int, names: Sequence[str], what: str) -> int:
    upper = text.upper()
    if upper in names:
        return names.index(upper) + low
    if not _DIGITS.match(text):
        raise FreezeError(
            f"{what}: {text!r} is not a number" + (f" or one of {', '.join(names)}" if names else "")
        )
    return int(text)


def _field(text: str, what: str, low: int, high: int, names: Sequence[str]) -> tuple[frozenset[int], bool]:
    values: set[int] = set()
    for part in text.split(","):
        body, slash, step_text = part.partition("/")
        step = 1
        if slash:
            if not _DIGITS.match(step_text) or int(step_text) < 1:
                raise FreezeError(
                    f"{what}: step {step_text!r} in {part!r} must be a whole number of 1 or more"
                )
            step = int(step_text)
        if body == "*":
            first, last = low, high
        elif "-" in body:
            a, _, b = body.partition("-")
            first, last = _value(a, low, names, what), _value(b, low, names, what)
            if first > last:
                raise FreezeError(f"{what}: range {body!r} runs backwards")
        elif body:
            first = _value(body, low, names, what)
            last = high if slash else first
        else:
            raise FreezeError(f"{what}: empty entry in {text!r}")
        for v in (first, last):
            if not low <= v <= high:
                raise FreezeError(f"{what}: {v} is outside {low}-{high}")
        values.update(range(first, last + 1, step))
    return frozenset(values), text == "*"


def parse_cron(expression: str) -> Cron:
    """Five fields: minute hour day-of-month month day-of-week; ``*``, numbers, names (``JAN``,
    ``FRI``), ranges (``MON-FRI``), steps (``*/15``, ``0-30/10``) and lists (``1,15``)."""
    fields = expression.split()
    if len(fields) != 5:
        raise FreezeError(
            f"cron {expression!r} has {len(fields)} field(s); "
            "write five: minute hour day-of-month month day-of-week"
        )
    parsed = [_field(text, *spec) for text, spec in zip(fields, _FIELDS, strict=True)]
    weekdays = frozenset(d % 7 for d in parsed[4][0])
    return Cron(parsed[0][0], parsed[1][0], parsed[2][0], parsed[3][0], weekdays, parsed[2][1], parsed[4][1])


@functools.lru_cache(maxsize=1)
def _zones() -> frozenset[str]:
    return frozenset(available_timezones())


def zone_of(name: str) -> ZoneInfo:
    """An IANA zone by name: one of the zones the system's (or tzdata's) database lists, so a
    folder (``Europe``) or a helper file (``posixrules``) is no zone."""
    if name not in _zones():
        raise FreezeError(f"timezone {name!r} is not a known IANA time zone (such as Europe/Berlin or UTC)")
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, OSError) as e:
        raise FreezeError(
            f"timezone {name!r} is not a known IANA time zone (such as Europe/Berlin or UTC)"
        ) from e


def instant(text: str) -> float:
    """An RFC 3339 date-time with its offset, as epoch seconds."""
    if not isinstance(text, str) or not _RFC3339.match(text):
        raise FreezeError(
            f"{text!r} is not an RFC 3339 date-time with an offset, such as 2026-12-24T00:00:00Z"
        )
    try:
        return datetime.fromisoformat(text.replace("z", "Z")).timestamp()
    except ValueError as e:
        raise FreezeError(f"{text!r} is not a valid date-time: {e}") from e


@dataclass(frozen=True)
class CronWindow:
    cron: Cron
    duration_s: float
    zone: ZoneInfo

    def starts(self, lo: float, hi: float, *, backwards: bool) -> Iterator[float]:
        """Window starts in ``(lo, hi]``, latest first (``backwards``) or earliest first."""
        first = datetime.fromtimestamp(lo, self.zone).date() - timedelta(days=1)
        last = datetime.fromtimestamp(hi, self.zone).date() + timedelta(days=1)
        span = (last - first).days
        offsets = range(span, -1, -1) if backwards else range(span + 1)
        hours, minutes = (
            sorted(self.cron.hours, reverse=backwards),
            sorted(self.cron.minutes, reverse=backwards),
        )
        for offset in offsets:
            day = first + timedelta(days=offset)
            if not self.cron.matches_day(day):
                continue
            for h in hours:
                for m in minutes:
                    t = datetime(day.year, day.month, day.day, h, m, tzinfo=self.zone).timestamp()
                    if lo < t <= hi:
                        yield t

    def covering(self, now: float) -> tuple[float, float] | None:
        start = next(self.starts(now - self.duration_s, now, backwards=True), None)
        return None if start is None else (start, start + self.duration_s)

    def next_start(self, now: float) -> float | None:
        return next(self.starts(now, now + SEARCH_DAYS * 86400.0, backwards=False), None)


@dataclass(frozen=True)
class FixedWindow:
    start: float
    end: float

    def covering(self, now: float) -> tuple[float, float] | None:
        return (self.start, self.end) if self.start <= now < self.end else None

    def next_start(self, now: float) -> float | None:
        return self.start if self.start > now else None


Window = CronWindow | FixedWindow


def window_of(entry: Mapping[str, Any]) -> Window:
    """One ``freeze:`` entry (its shape checked by the schema) as a window."""
    if "cron" in entry:
        cron = parse_cron(str(entry["cron"]))
        zone = zone_of(str(entry.get("timezone", "UTC")))
        return CronWindow(cron, float(entry["duration_h"]) * 3600.0, zone)
    start, end = instant(entry["from"]), instant(entry["to"])
    if start >= end:
        raise FreezeError(f"from {entry['from']} must be before to {entry['to']}")
    return FixedWindow(start, end)


def windows_of(entries: Sequence[Mapping[str, Any]]) -> tuple[Window, ...]:
    return tuple(window_of(e) for e in entries)


def frozen_until(windows: Sequence[Window], now: float) -> float | None:
    """When the freeze in force at ``now`` ends (windows that overlap or touch run on as one);
    ``None``: not frozen at ``now``."""
    end = None
    at = now
    for _ in range(1000):  # chained windows: each step moves ``at`` on, never back
        ends = [c[1] for w in windows if (c := w.covering(at)) is not None]
        if not ends:
            break
        end = max(ends)
        at = end
    return end


def next_start(windows: Sequence[Window], now: float) -> float | None:
    """When the next window starts after ``now`` (``None``: none within the search horizon)."""
    starts = [s for w in windows if (s := w.next_start(now)) is not None]
    return min(starts, default=None)
