"""The actual view's verdicts for a reader that listens briefly (``phrame status``), on the
reader's clock: a heartbeat heard live is aged from its arrival whatever the node's clock
says; a retained one counts only when its ``ts`` agrees with our silence; which nodes are
worth listening for still. The view is fed by hand at given clock values: no broker."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from phrame.actual import ActualView
from phrame.actual.judging import missed_after
from phrame.cli.status_text import clock_note, render_text
from phrame.cli.status_view import summarize
from schemas import Topics

T = Topics()
NOW = 1_000_000.0
ONLINE = {"state": "online", "converged": True, "generation": 1, "commit": "c1"}
TIMEOUT = 20.0


def listened(seconds: float, **nodes: dict[str, Any]) -> ActualView:
    """A view that has listened ``seconds`` until NOW: each node's retained ``status`` and
    heartbeat (``ts``, ``interval``) arrived as it began, its ``live`` beat (received at,
    ts) later."""
    start = NOW - seconds
    view = ActualView(T, timeout_s=TIMEOUT, clock=lambda: NOW, started_at=start, log_invalid=False)
    for name, node in nodes.items():
        if node.get("status") is not None:
            view.status(name, node["status"], retained=True, received_at=start)
        if node.get("ts") is not None:
            beat = {"ts": node["ts"], "interval_s": node.get("interval", 5)}
            view.heartbeat(name, beat, retained=True, received_at=start)
        if node.get("live") is not None:
            at, ts = node["live"]
            view.heartbeat(name, {"ts": ts, "interval_s": 5}, retained=False, received_at=at)
    return view


def node(status: Mapping[str, Any] | None = ONLINE, ts: float | None = None, **kw: Any) -> dict[str, Any]:
    return {"status": status, "ts": ts, **kw}


def test_a_heartbeat_heard_live_is_aged_from_its_arrival_whatever_its_clock_says() -> None:
    for skew in (-600.0, 600.0):
        view = listened(2, n=node(ts=NOW - 6 + skew, live=(NOW - 1, NOW - 1 + skew)))
        v = view.verdict("n")
        assert (v.state, v.heartbeat_age_s) == ("online", 1.0), (skew, v)
        assert view.facts("n").clock_offset_s == skew  # type: ignore[union-attr]


def test_a_live_heartbeat_after_a_retained_will_is_online() -> None:
    view = listened(3, n=node({"state": "offline"}, NOW - 30, live=(NOW - 1, NOW - 1)))
    assert view.verdict("n").is_online


def test_silent_past_the_timeout_on_the_readers_clock_is_offline_even_dated_in_the_future() -> None:
    v = listened(TIMEOUT + 1, n=node(ts=NOW + 600, interval=1)).verdict("n")  # a dead node, clock ahead
    assert v.state == "offline" and v.reason.startswith("no heartbeat for 21 s"), v


def test_not_heard_and_dated_later_than_our_silence_allows_is_unknown_not_online() -> None:
    v = listened(5, n=node(ts=NOW + 600)).verdict("n")  # a clock ahead: dead or alive?
    assert v.state == "unknown" and "dated 600 s from now by its own clock, which is ahead" in v.reason, v


def test_a_node_a_few_beats_late_with_a_clock_that_agrees_stays_online() -> None:
    """No flapping: a busy agent's heartbeat may come late; the timeout rule still holds."""
    v = listened(5, n=node(ts=NOW - 7, interval=1)).verdict("n")
    assert (v.state, v.heartbeat_age_s) == ("online", 7.0), v


def test_not_heard_and_dated_older_than_the_timeout_is_offline() -> None:
    v = listened(missed_after(5), n=node(ts=NOW - 45)).verdict("n")
    assert v.state == "offline" and v.reason == "no heartbeat for 45 s", v


def test_listening_too_briefly_to_tell_falls_back_to_the_nodes_own_clock() -> None:
    assert listened(1, n=node(ts=NOW - 4)).verdict("n").state == "online"
    assert listened(0, n=node(ts=NOW - 45)).verdict("n").state == "offline"


def test_the_listen_waits_only_for_nodes_it_can_still_learn_about() -> None:
    nodes = {
        "heard": node(ts=NOW - 600, interval=1),
        "will": node({"state": "offline"}, NOW - 30, interval=1),
        "late": node(ts=NOW - 3, interval=1),
        "ahead": node(ts=NOW + 600, interval=1),  # only our own silence can tell
    }

    nodes["heard"] |= {"live": (NOW - 0.5, NOW - 600.5)}  # its clock 600 s behind

    def unsettled(seconds: float) -> list[str]:
        return listened(seconds, **nodes).unsettled()

    assert unsettled(0.5) == ["ahead", "late"]
    assert unsettled(missed_after(1)) == ["ahead"]
    assert unsettled(TIMEOUT + 0.1) == []


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
    view = listened(3, **{"edge-01": node(ts=NOW - 605, live=(NOW - 1, NOW - 601))})
    (row,) = summarize(retained, NOW, T, TIMEOUT, view=view).nodes
    assert (row.state, row.heard_live, row.clock_offset_s, row.heartbeat_age_s) == (
        "online",
        True,
        -600.0,
        1.0,
    )
    assert (
        "    clock 600 s behind this host"
        in render_text(summarize(retained, NOW, T, TIMEOUT, view=view)).splitlines()
    )
    # without the live heartbeat the same retained one is ten minutes old by its own clock
    assert summarize(retained, NOW, T, TIMEOUT).nodes[0].state == "offline"
