"""Subscriptions: each filter split once, each message matched as the broker would."""

from __future__ import annotations

import pytest

from phrame.mqtt import Message
from phrame.mqtt import subscriptions as subs_module
from phrame.mqtt.paho_setup import topic_matches_sub
from phrame.mqtt.subscriptions import FilterMatch, Subscriptions

FILTERS = [
    "#",
    "+",
    "+/+",
    "a/#",
    "a/+",
    "a/+/c",
    "a/b/c",
    "a/b/#",
    "+/b/#",
    "a//c",
    "a/+/#",
    "$SYS/#",
    "/+",
    "+/",
]
TOPICS = [
    "a",
    "a/b",
    "a/b/c",
    "a/b/c/d",
    "a//c",
    "/a",
    "a/",
    "b/b/x",
    "$SYS/broker/load",
    "$SYS",
    "x",
    "/",
    "",
]


def recording(**filters: str) -> tuple[Subscriptions, list[tuple[str, str]]]:
    """Subscriptions whose callbacks record (name, topic) of each message, in order."""
    subs, got = Subscriptions(), []
    for name, topic_filter in filters.items():
        subs.add(topic_filter, lambda m, name=name: got.append((name, m.topic)))  # type: ignore[misc]
    return subs, got


@pytest.mark.parametrize("topic_filter", FILTERS)
def test_a_compiled_filter_matches_as_paho_does(topic_filter: str) -> None:
    match = FilterMatch(topic_filter)
    for topic in TOPICS:
        assert match.matches(topic, topic.split("/")) == bool(topic_matches_sub(topic_filter, topic)), topic


def test_dispatch_uses_the_filters_compiled_once_not_a_matcher_per_message(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    subs, got = recording(beat="phrame/actual/nodes/+/heartbeat", all="phrame/actual/nodes/#")
    subs.add_temporary(1, "phrame/desired/#", lambda m: got.append(("read", m.topic)))

    def per_message(*_: object) -> bool:  # paho's builds a matcher tree per call
        raise AssertionError("a matcher per message and filter")

    monkeypatch.setattr(subs_module, "topic_matches_sub", per_message)
    subs.dispatch(Message(topic="phrame/actual/nodes/n1/heartbeat", payload=b"{}", retain=False))
    subs.dispatch(Message(topic="phrame/desired/nodes/n1/manifest", payload=b"{}", retain=False))
    assert not subs.remove_temporary(1)
    subs.dispatch(Message(topic="phrame/desired/nodes/n1/manifest", payload=b"{}", retain=False))
    assert got == [
        ("beat", "phrame/actual/nodes/n1/heartbeat"),
        ("all", "phrame/actual/nodes/n1/heartbeat"),
        ("read", "phrame/desired/nodes/n1/manifest"),
    ]


def test_a_read_of_a_permanent_filter_leaves_it_matching() -> None:
    subs = Subscriptions()
    got: list[str] = []
    subs.add("a/#", lambda m: got.append("kept"))
    subs.add_temporary(7, "a/#", lambda m: got.append("read"))
    assert subs.remove_temporary(7)
    subs.dispatch(Message(topic="a/b", payload=b"", retain=False))
    assert got == ["kept"]


def test_a_topic_seen_before_is_not_matched_again_until_a_filter_is_added(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    subs, got = recording(beat="phrame/actual/nodes/+/heartbeat", status="phrame/actual/nodes/+/status")
    tried: list[str] = []
    matches = FilterMatch.matches

    def counted(self: FilterMatch, topic: str, parts: list[str]) -> bool:
        tried.append(topic)
        return matches(self, topic, parts)

    monkeypatch.setattr(FilterMatch, "matches", counted)
    beat = Message(topic="phrame/actual/nodes/n1/heartbeat", payload=b"{}", retain=False)
    for _ in range(100):  # a node's heartbeats: the same topic every few seconds
        subs.dispatch(beat)
    assert len(tried) == 2  # both filters, once
    subs.add_temporary(1, "phrame/actual/#", lambda m: got.append(("read", m.topic)))
    subs.dispatch(beat)  # a read is matched while it lasts
    subs.remove_temporary(1)
    subs.add("phrame/actual/#", lambda m: got.append(("all", m.topic)))  # a new filter: matched again
    subs.dispatch(beat)
    assert got == [("beat", beat.topic)] * 101 + [
        ("read", beat.topic),
        ("beat", beat.topic),
        ("all", beat.topic),
    ]
