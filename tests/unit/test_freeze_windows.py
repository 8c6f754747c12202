"""Deploy freezes, purely: cron fields, windows in a time zone across DST, chained windows."""

from __future__ import annotations

from datetime import datetime
from zoneinfo import ZoneInfo

import pytest

from phrame.config_repo.freeze import (
    FreezeError,
    frozen_until,
    next_start,
    parse_cron,
    window_of,
    windows_of,
)

UTC = ZoneInfo("UTC")
BERLIN = ZoneInfo("Europe/Berlin")


def at(text: str, zone: ZoneInfo = UTC) -> float:
    return datetime.fromisoformat(text).replace(tzinfo=zone).timestamp()


def test_cron_fields_names_ranges_steps_lists() -> None:
    cron = parse_cron("*/15 9-17/4 1,15 JAN-mar MON-FRI")
    assert cron.minutes == {0, 15, 30, 45}
    assert cron.hours == {9, 13, 17}
    assert cron.days == {1, 15} and cron.months == {1, 2, 3}
    assert cron.weekdays == {1, 2, 3, 4, 5}
    assert parse_cron("0 0 * * 7").weekdays == {0}  # 7 is Sunday too
    assert parse_cron("5/20 * * * *").minutes == {5, 25, 45}


@pytest.mark.parametrize(
    ("expression", "words"),
    [
        ("0 18 * *", "has 4 field(s)"),
        ("0 25 * * *", "hour: 25 is outside 0-23"),
        ("0 18 * * FRY", "'FRY' is not a number"),
        ("*/0 * * * *", "step '0'"),
        ("0 18 5-1 * *", "runs backwards"),
        ("0 18 ,1 * *", "empty entry"),
        ("\u00b2 * * * *", "is not a number"),  # str.isdigit says yes; int() says no
        ("0 0 \u0663 * *", "is not a number"),  # an Arabic-Indic 3: ASCII digits only
        ("*/\u00b2 * * * *", "step"),
    ],
)
def test_bad_cron_says_what(expression: str, words: str) -> None:
    with pytest.raises(FreezeError, match=words.replace("(", r"\(").replace(")", r"\)")):
        parse_cron(expression)


def test_day_fields_either_matches_when_both_restricted() -> None:
    cron = parse_cron("0 0 13 * FRI")
    assert cron.matches_day(datetime(2026, 3, 13).date())  # a Friday the 13th
    assert cron.matches_day(datetime(2026, 3, 6).date())  # any Friday
    assert cron.matches_day(datetime(2026, 4, 13).date())  # any 13th
    assert not cron.matches_day(datetime(2026, 4, 14).date())


def test_weekend_freeze_in_berlin() -> None:
    windows = windows_of([{"cron": "0 18 * * FRI", "duration_h": 62, "timezone": "Europe/Berlin"}])
    # Friday 4 December 2026, 18:00 in Berlin is 17:00 UTC
    assert frozen_until(windows, at("2026-12-04T16:59:00")) is None
    assert frozen_until(windows, at("2026-12-04T17:00:00")) == at("2026-12-07T08:00:00", BERLIN)
    assert frozen_until(windows, at("2026-12-06T12:00:00")) == at("2026-12-07T08:00:00", BERLIN)
    assert frozen_until(windows, at("2026-12-07T07:00:00")) is None  # 08:00 in Berlin: over
    assert next_start(windows, at("2026-12-07T07:00:00")) == at("2026-12-11T18:00:00", BERLIN)


def test_window_across_a_dst_change_lasts_its_hours() -> None:
    # Berlin goes from +1 to +2 at 02:00 on Sunday 29 March 2026: a 62 h window starting
    # Friday 18:00 CET ends Monday 09:00 CEST (62 elapsed hours), not 08:00
    window = window_of({"cron": "0 18 * * FRI", "duration_h": 62, "timezone": "Europe/Berlin"})
    start = at("2026-03-27T18:00:00", BERLIN)
    assert frozen_until((window,), start + 3600) == start + 62 * 3600
    assert datetime.fromtimestamp(start + 62 * 3600, BERLIN).hour == 9


def test_start_in_a_spring_gap_is_read_with_the_offset_before() -> None:
    window = window_of({"cron": "30 2 * * *", "duration_h": 1, "timezone": "Europe/Berlin"})
    # 02:30 does not exist on 29 March 2026 in Berlin: read as 02:30 +01:00 = 01:30 UTC
    assert frozen_until((window,), at("2026-03-29T01:45:00")) == at("2026-03-29T02:30:00")


def test_fixed_window_and_chained_windows() -> None:
    windows = windows_of(
        [
            {"from": "2026-12-24T00:00:00Z", "to": "2026-12-27T00:00:00Z"},
            {"from": "2026-12-26T12:00:00+01:00", "to": "2026-12-28T00:00:00Z"},
        ]
    )
    assert frozen_until(windows, at("2026-12-23T23:59:59")) is None
    assert frozen_until(windows, at("2026-12-24T00:00:00")) == at("2026-12-28T00:00:00")
    assert frozen_until(windows, at("2026-12-28T00:00:00")) is None
    assert next_start(windows, at("2026-12-01T00:00:00")) == at("2026-12-24T00:00:00")


@pytest.mark.parametrize(
    ("entry", "words"),
    [
        ({"from": "2026-12-24", "to": "2026-12-27T00:00:00Z"}, "not an RFC 3339"),
        ({"from": "2026-12-24T00:00:00", "to": "2026-12-27T00:00:00Z"}, "not an RFC 3339"),
        ({"from": "2026-12-27T00:00:00Z", "to": "2026-12-24T00:00:00Z"}, "must be before"),
        ({"cron": "0 18 * * FRI", "duration_h": 1, "timezone": "Mars/Olympus"}, "not a known IANA"),
        ({"cron": "0 18 * * FRI", "duration_h": 1, "timezone": "Europe"}, "not a known IANA"),  # a folder
        ({"cron": "0 18 * * FRI", "duration_h": 1, "timezone": "posixrules"}, "not a known IANA"),
        ({"cron": "0 18 * * FRI", "duration_h": 1, "timezone": "../etc/passwd"}, "not a known IANA"),
    ],
)
def test_bad_windows(entry: dict[str, object], words: str) -> None:
    with pytest.raises(FreezeError, match=words):
        window_of(entry)
