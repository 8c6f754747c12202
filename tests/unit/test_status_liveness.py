"""``phrame status``'s liveness rule on the reader's clock (fault case 7): pure, no broker."""

from __future__ import annotations

import json

from phrame.cli.status_liveness import Listen, LiveBeat, Retained, clock_note, judge, missed_after, undecided
from phrame.cli.status_text import render_text
from phrame.cli.status_view import summarize
from schemas import Topics

T = Topics()
NOW = 1_000_000.0
ONLINE = {"state": "online", "converged": True, "generation": 1, "commit": "c1"}
TIMEOUT = 20.0


def listened(seconds: float, **live: LiveBeat) -> Listen:
    return Listen(NOW - seconds, NOW, live)


def test_a_heartbeat_heard_live_is_aged_from_its_arrival_whatever_its_clock_says() -> None:
    for skew in (-600.0, 600.0):
        beat = LiveBeat(received_at=NOW - 1, ts=NOW - 1 + skew, interval_s=5)
        node = Retained(ONLINE, ts=NOW - 6 + skew, interval_s=5)
        v = judge(node, beat, listened(2, n=beat), NOW, TIMEOUT)
        assert (v.state, v.heartbeat_age_s) == ("online", 1.0), (skew, v)
        assert beat.clock_offset_s == skew


def test_a_live_heartbeat_after_a_retained_will_is_online() -> None:
    beat = LiveBeat(NOW - 1, NOW - 1, 5)
    assert judge(Retained({"state": "offline"}, NOW - 30, 5), beat, listened(3), NOW, TIMEOUT).is_online


def test_silent_past_the_timeout_on_the_readers_clock_is_offline_even_dated_in_the_future() -> None:
    node = Retained(ONLINE, ts=NOW + 600, interval_s=1)  # a dead node whose clock is ahead
    v = judge(node, None, listened(TIMEOUT + 1), NOW, TIMEOUT)
    assert v.state == "offline" and v.reason.startswith("no heartbeat for 21 s"), v


def test_not_heard_and_dated_later_than_our_silence_allows_is_unknown_not_online() -> None:
    node = Retained(ONLINE, ts=NOW + 600, interval_s=5)  # a clock ahead: dead or alive?
    v = judge(node, None, listened(5), NOW, TIMEOUT)
    assert v.state == "unknown" and "dated 600 s from now by its own clock, which is ahead" in v.reason, v


def test_a_node_a_few_beats_late_with_a_clock_that_agrees_stays_online() -> None:
    """No flapping: a busy agent's heartbeat may come late; the timeout rule still holds."""
    v = judge(Retained(ONLINE, ts=NOW - 7, interval_s=1), None, listened(5), NOW, TIMEOUT)
    assert (v.state, v.heartbeat_age_s) == ("online", 7.0), v


def test_not_heard_and_dated_older_than_the_timeout_is_offline() -> None:
    v = judge(Retained(ONLINE, ts=NOW - 45, interval_s=5), None, listened(missed_after(5)), NOW, TIMEOUT)
    assert v.state == "offline" and v.reason == "no heartbeat for 45 s", v


def test_listening_too_briefly_to_tell_falls_back_to_the_nodes_own_clock() -> None:
    assert judge(Retained(ONLINE, NOW - 4, 5), None, listened(1), NOW, TIMEOUT).state == "online"
    assert judge(Retained(ONLINE, NOW - 45, 5), None, None, NOW, TIMEOUT).state == "offline"


def test_the_listen_waits_only_for_nodes_it_can_still_learn_about() -> None:
    nodes = {
        "heard": Retained(ONLINE, NOW - 600, 1),
        "will": Retained({"state": "offline"}, NOW - 30, 1),
        "late": Retained(ONLINE, NOW - 3, 1),
        "ahead": Retained(ONLINE, NOW + 600, 1),  # only our own silence can tell
    }
    beat = LiveBeat(NOW - 0.5, NOW - 600.5, 1)
    assert undecided(nodes, listened(0.5, heard=beat), NOW, TIMEOUT) == ["ahead", "late"]
    assert undecided(nodes, listened(missed_after(1), heard=beat), NOW, TIMEOUT) == ["ahead"]
    assert undecided(nodes, listened(TIMEOUT + 0.1, heard=beat), NOW, TIMEOUT) == []


def test_the_clock_note_names_the_direction_and_ignores_latency() -> None:
    assert clock_note(-600.2) == "clock 600 s behind this host"
    assert clock_note(600.0) == "clock 600 s ahead of this host"
    assert clock_note(0.3) is None and clock_note(None) is None


def test_summarize_shows_a_skewed_node_heard_live_as_online_with_its_offset() -> None:
    host = dict.fromkeys(["cpu_percent", "load1", "mem_total", "mem_used", "disk_total", "disk_used"], 1)
    retained = {
        T.status("edge-01"): json.dumps(ONLINE).encode(),
        T.heartbeat("edge-01"): json.dumps(
            {"ts": NOW - 605, "seq": 1, "interval_s": 5, "host": host}
        ).encode(),
    }
    s = summarize(
        retained, NOW, T, TIMEOUT, listen=listened(3, **{"edge-01": LiveBeat(NOW - 1, NOW - 601, 5)})
    )
    (row,) = s.nodes
    assert (row.state, row.heard_live, row.clock_offset_s, row.heartbeat_age_s) == (
        "online",
        True,
        -600.0,
        1.0,
    )
    assert "    clock 600 s behind this host" in render_text(s).splitlines()
    # without the live heartbeat the same retained one is ten minutes old by its own clock
    assert summarize(retained, NOW, T, TIMEOUT).nodes[0].state == "offline"
