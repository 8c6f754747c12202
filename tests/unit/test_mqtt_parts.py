"""The client's pure parts: token responses, retained collection, acks, topic filters."""

from __future__ import annotations

import threading
import time

import pytest

from phrame.mqtt import Message, MqttError, PublishRefused, PublishTimeout, TokenError
from phrame.mqtt.acks import AckTracker
from phrame.mqtt.disconnects import ShortConnections, describe_disconnect
from phrame.mqtt.messages import MAX_TOPIC_LEVELS, check_filter, check_topic
from phrame.mqtt.oauth import Token, parse_token_response
from phrame.mqtt.reading import RetainedCollector
from tests.support.oauth_server import mint_token, verify_token
from tests.support.services import eventually


def test_token_response_and_refresh_time() -> None:
    token = parse_token_response(b'{"access_token": "abc", "expires_in": 100}', now=50.0)
    assert token == Token("abc", 100.0, 50.0)
    assert token.refresh_at() == 125.0  # at three quarters of the lifetime
    unknown = parse_token_response(b'{"access_token": "abc"}', now=0.0)
    assert unknown.lifetime_s == 300.0


@pytest.mark.parametrize("body", [b"<html>", b"[]", b'{"token_type": "Bearer"}'])
def test_bad_token_responses(body: bytes) -> None:
    with pytest.raises(TokenError):
        parse_token_response(body, now=0.0)


def test_test_tokens_check_signature_and_expiry() -> None:
    good = mint_token("k", "node-a", time.time() + 10)
    assert verify_token("k", good) == "node-a"
    assert verify_token("other", good) is None
    assert verify_token("k", mint_token("k", "node-a", time.time() - 1)) is None
    assert verify_token("k", "garbage") is None


def test_collector_keeps_retained_drops_cleared_and_takes_live_updates() -> None:
    c = RetainedCollector("p/#", settle=0.05, timeout=2)
    c.add(Message("p/a", b"1", True))
    c.add(Message("p/b", b"2", True))
    c.add(Message("p/b", b"", True))
    c.add(Message("p/a", b"newer", False))  # published live during the collection
    assert c.wait() == {"p/a": b"newer"}


def test_collector_settles_although_live_messages_keep_coming() -> None:
    c = RetainedCollector("p/#", settle=0.1, timeout=5.0)
    c.add(Message("p/a", b"1", True))
    stop = threading.Event()

    def heartbeats() -> None:  # a steady live stream, faster than the settle time
        for i in range(200):
            if stop.wait(0.02):
                return
            c.add(Message("p/hb", str(i).encode(), False))

    beat = threading.Thread(target=heartbeats)
    beat.start()
    try:
        result = c.wait()  # would raise "kept arriving" after 5 s if live messages counted
    finally:
        stop.set()
        beat.join()
    assert result["p/a"] == b"1"


def test_collector_gives_up_when_messages_never_stop() -> None:
    now = [0.0]
    c = RetainedCollector("p/#", settle=1.0, timeout=2.0, clock=lambda: now[0])
    c.add(Message("p/a", b"1", True))
    now[0] = 5.0  # past the deadline, and not one quiet second since the wait began
    with pytest.raises(MqttError, match="kept arriving"):
        c.wait()


def test_acks_count_only_after_the_mark_and_report_refusals() -> None:
    acks = AckTracker()
    acks.acked(7, refused=False)  # an old use of mid 7
    mark = acks.mark()
    with pytest.raises(PublishTimeout) as timeout:
        acks.wait_batch({7: "t/a"}, mark, 0.05, "broker")
    assert timeout.value.pending == ["t/a"]
    acks.acked(7, refused=False)
    acks.acked(8, refused=True)
    with pytest.raises(PublishRefused) as refused:
        acks.wait_batch({7: "t/a", 8: "t/b"}, mark, 1, "broker")
    assert refused.value.topics == ["t/b"]


class CountingCondition(threading.Condition):
    """A real condition that counts its wake-ups."""

    def __init__(self) -> None:
        super().__init__()
        self.wakeups = 0

    def notify_all(self) -> None:
        self.wakeups += 1
        super().notify_all()


def wait_in_thread(
    acks: AckTracker, sent: dict[int, str], mark: int
) -> tuple[threading.Thread, list[object]]:
    outcome: list[object] = []

    def wait() -> None:
        try:
            acks.wait_batch(sent, mark, 10, "broker")
            outcome.append("done")
        except Exception as e:  # the test says what it was
            outcome.append(e)

    thread = threading.Thread(target=wait)
    thread.start()
    return thread, outcome


def test_a_batch_waiter_is_woken_by_the_last_puback_it_needs_not_by_each() -> None:
    acks = AckTracker()
    acks._cond = cond = CountingCondition()
    mark = acks.mark()
    sent = {mid: f"t/{mid}" for mid in range(1, 1001)}
    thread, outcome = wait_in_thread(acks, sent, mark)
    assert eventually(lambda: bool(acks._wanted))  # it waits
    for mid in sent:  # in order, as a broker acknowledges one connection's messages
        acks.acked(mid, refused=False)
    thread.join(10)
    assert outcome == ["done"] and cond.wakeups == 1 and not acks._wanted


def test_a_batch_acknowledged_out_of_order_completes() -> None:
    acks = AckTracker()
    mark = acks.mark()
    sent = {mid: f"t/{mid}" for mid in range(1, 101)}
    thread, outcome = wait_in_thread(acks, sent, mark)
    assert eventually(lambda: bool(acks._wanted))
    for mid in reversed(sent):  # the last first: the waiter looks again for each still open
        acks.acked(mid, refused=False)
    thread.join(10)
    assert outcome == ["done"] and not acks._wanted


@pytest.mark.parametrize("good", ["a/b", "a/+/c", "#", "a/#", "+"])
def test_valid_filters(good: str) -> None:
    assert check_filter(good) == good


@pytest.mark.parametrize("bad", ["", "a/#/b", "a#", "a/b+", "x\x00"])
def test_invalid_filters(bad: str) -> None:
    with pytest.raises(ValueError, match="invalid topic filter"):
        check_filter(bad)


def test_disconnect_reasons_read_as_sentences() -> None:
    # paho's "Unspecified error" without a DISCONNECT packet: the socket just closed
    closed = describe_disconnect(128, "Unspecified error", from_broker=False)
    assert closed.startswith("the broker closed the connection") and "Unspecified" not in closed
    assert describe_disconnect(139, "Server shutting down", from_broker=True) == (
        "the broker closed the connection (server shutting down)"
    )
    assert "session taken over" in describe_disconnect(142, "Session taken over", from_broker=True)
    assert "keepalive" in describe_disconnect(141, "Keep alive timeout", from_broker=False)
    assert describe_disconnect(153, "Payload format invalid", from_broker=True).endswith(
        "Payload format invalid"
    )


def test_short_connections_hint_once_after_three_in_a_row() -> None:
    short = ShortConnections()
    assert [short.ended(s) for s in (1.0, 1.0, 60.0, 1.0, 1.0)] == [False] * 5  # a long one resets
    assert short.ended(0.5) is True
    assert short.ended(0.5) is False  # said once


def test_topic_names_within_the_brokers_limits() -> None:
    assert check_topic("a/b/c") == "a/b/c"
    assert check_topic("a b/\xa0/é/\u200b/\U0001f600/\ufffd") is not None  # the broker takes these
    assert check_topic("/".join(["x"] * MAX_TOPIC_LEVELS)) is not None
    for bad, said in [
        ("/".join(["x"] * (MAX_TOPIC_LEVELS + 1)), f"more than {MAX_TOPIC_LEVELS} levels"),
        ("a" * 65536, "65535 bytes"),
        ("é" * 40000, "65535 bytes"),  # bytes of UTF-8, not characters
        ("", "empty"),
        ("a/+/b", "wildcard"),
        ("a/#", "wildcard"),
        ("a\x00b", "NUL"),
        ("a/\ud800", "not valid Unicode"),
        ("a/\x1f", "U\\+001F, a control character"),
        ("a/\x85", "U\\+0085"),
        ("a/\x7f", "U\\+007F"),
        ("a/\ufdd0", "noncharacter"),
        ("a/\uffff", "U\\+FFFF"),
        ("a/\U0010fffe", "U\\+10FFFE"),
    ]:
        with pytest.raises(ValueError, match=said):
            check_topic(bad)


def test_the_refused_characters_are_one_class_that_matches_the_rule() -> None:
    """check_topic searches a topic once with a character class; the class refuses exactly
    the code points the rule names (C0, DEL and C1 controls, noncharacters)."""
    from phrame.mqtt.messages import _REFUSED, _is_refused_char

    beyond = [p << 16 | low for p in range(1, 17) for low in (0, 0x20, 0x85, 0xFDD0, 0xFFFD, 0xFFFE, 0xFFFF)]
    for code in [*range(0x10000), *beyond]:
        if 0xD800 <= code <= 0xDFFF:
            continue  # lone surrogates: refused by the UTF-8 check
        assert bool(_REFUSED.match(chr(code))) == _is_refused_char(code), hex(code)
