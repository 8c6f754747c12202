"""MQTT filter checks and matching of ``/api/topics?filter=`` (as a broker matches them)."""

from __future__ import annotations

import pytest

from topic_api.topic_filter import FilterError, check_filter, select

TOPICS = ["a", "a/b", "a/b/c", "a/x/c", "b", "$SYS/x", "a//c"]


@pytest.mark.parametrize(
    ("flt", "expected"),
    [
        ("#", ["a", "a//c", "a/b", "a/b/c", "a/x/c", "b"]),  # not $SYS
        ("a/#", ["a", "a//c", "a/b", "a/b/c", "a/x/c"]),  # 'a/#' matches 'a' itself
        ("a/+", ["a/b"]),
        ("a/+/c", ["a//c", "a/b/c", "a/x/c"]),  # '+' matches an empty level
        ("+", ["a", "b"]),
        ("+/+", ["a/b"]),
        ("a/b", ["a/b"]),
        ("a/b/c/#", ["a/b/c"]),
        ("$SYS/#", ["$SYS/x"]),
        ("c", []),
    ],
)
def test_matches_as_mqtt(flt: str, expected: list[str]) -> None:
    assert select(flt, TOPICS) == expected


@pytest.mark.parametrize("flt", ["", "a/#/b", "a#", "a/b+", "+a", "##", "a\x00b", "x" * 1025])
def test_invalid_filters_are_refused_with_a_reason(flt: str) -> None:
    with pytest.raises(FilterError) as e:
        check_filter(flt)
    assert str(e.value)
