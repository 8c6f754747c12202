"""phrame.actual.ActualView: heartbeats and wills on the receiver's clock, retained copies
dated by their ``ts`` (and not trusted past the timeout or ahead), resume after a gap,
items' healthy time, listeners, invalid reports. A fake clock throughout."""

from __future__ import annotations

import json
from typing import Any

from phrame.actual import ActualView, Change
from phrame.mqtt import Message
from schemas import Topics

T = Topics()
T0 = 1_000.0
HOST = dict.fromkeys(["cpu_percent", "load1", "mem_total", "mem_used", "disk_total", "disk_used"], 1)


class Clock:
    def __init__(self, now: float = T0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def view(clock: Clock | None = None) -> ActualView:
    return ActualView(T, timeout_s=20, clock=clock or Clock(), started_at=T0)


def beat(
    v: ActualView, node: str, ts: float, at: float, *, retained: bool = False, interval: float = 5
) -> None:
    v.heartbeat(node, {"ts": ts, "interval_s": interval}, retained=retained, received_at=at)


def will(v: ActualView, node: str, at: float, state: str = "offline") -> None:
    v.status(node, {"state": state}, received_at=at)


def test_online_until_the_timeout_then_offline_since_last_heartbeat_plus_timeout() -> None:
    v = view()
    beat(v, "a", T0, T0)
    assert v.verdict("a", T0 + 20).is_online
    late = v.verdict("a", T0 + 95)
    assert (late.state, late.offline_since, late.reason) == ("offline", T0 + 20, "no heartbeat for 95 s")


def test_a_live_heartbeat_counts_from_arrival_so_the_nodes_clock_does_not_matter() -> None:
    v = view()
    beat(v, "a", T0 - 3600, T0)  # node clock an hour behind
    assert v.verdict("a", T0 + 10).is_online
    assert v.facts("a").clock_offset_s == -3600  # type: ignore[union-attr]


def test_a_retained_heartbeat_dated_past_the_timeout_is_offline_but_counts_from_our_listen() -> None:
    """A stale-looking retained copy is a dead node's or a live node's whose clock is behind:
    not online, and its offline time counts only from a timeout after we started listening
    (no replica moves on a node's clock's word); unconfirmed until a live one comes."""
    v = view()
    beat(v, "behind", T0 - 600, T0 + 1, retained=True)
    verdict = v.verdict("behind", T0 + 2)
    assert (verdict.state, verdict.offline_since, verdict.reason) == (
        "offline",
        T0 + 20,
        "no heartbeat for 602 s",
    )
    assert v.unconfirmed(T0 + 2) == {"behind": T0 + 1 + 8.5}
    beat(v, "behind", T0 - 598, T0 + 3)  # its first live beat
    assert v.verdict("behind", T0 + 4).is_online and v.unconfirmed(T0 + 4) == {}


def test_a_node_dead_with_a_stale_retained_heartbeat_is_waited_for_a_beat_and_a_half_only() -> None:
    v = view()
    beat(v, "dead", T0 - 600, T0, retained=True, interval=2)
    assert set(v.unconfirmed(T0 + 3.9)) == {"dead"} and v.unconfirmed(T0 + 4.1) == {}
    beat(v, "fresh", T0 - 1, T0, retained=True)
    assert "fresh" not in v.unconfirmed(T0)


def test_a_fresh_retained_heartbeat_counts_from_its_own_ts() -> None:
    v = view()
    beat(v, "recent", T0 - 5, T0, retained=True)
    assert v.verdict("recent", T0 + 14).is_online
    assert v.verdict("recent", T0 + 16).offline_since == T0 + 15


def test_a_retained_heartbeat_dated_ahead_is_unknown_until_a_whole_timeout_of_silence() -> None:
    """A dead node whose clock is ahead would otherwise look alive: only our silence tells."""
    v = view()
    beat(v, "ahead", T0 + 600, T0, retained=True)
    early = v.verdict("ahead", T0 + 5)
    assert (
        early.state == "unknown" and "dated 595 s from now by its own clock, which is ahead" in early.reason
    )
    assert "ahead" in v.unconfirmed(T0 + 5)
    late = v.verdict("ahead", T0 + 21)
    assert (late.state, late.offline_since) == ("offline", T0 + 20)
    assert late.reason.startswith("no heartbeat for 21 s")


def test_an_older_heartbeat_never_rewinds_a_newer_one() -> None:
    v = view()
    beat(v, "a", T0 + 50, T0 + 50)
    beat(v, "a", T0, T0 + 51, retained=True)
    assert v.verdict("a", T0 + 60).is_online


def test_a_will_makes_a_node_offline_at_once_until_the_next_heartbeat() -> None:
    v = view()
    beat(v, "a", T0, T0)
    will(v, "a", T0 + 2)
    assert (v.verdict("a", T0 + 3).state, v.verdict("a", T0 + 3).offline_since) == ("offline", T0 + 2)
    will(v, "a", T0 + 9)  # a repeated will keeps the first time
    assert v.verdict("a", T0 + 10).offline_since == T0 + 2
    beat(v, "a", T0 + 11, T0 + 11)
    assert v.verdict("a", T0 + 12).is_online


def test_an_online_status_clears_the_will_but_heartbeat_age_still_rules() -> None:
    v = view()
    beat(v, "a", T0, T0)
    will(v, "a", T0 + 1)
    will(v, "a", T0 + 2, "online")
    assert v.verdict("a", T0 + 5).is_online and not v.verdict("a", T0 + 30).is_online


def test_a_node_never_heard_is_unknown_and_a_will_alone_is_offline() -> None:
    v = view()
    assert v.verdict("ghost", T0 + 95).state == "unknown"
    will(v, "ghost2", T0 + 3)
    assert (v.verdict("ghost2", T0 + 5).state, v.verdict("ghost2", T0 + 5).offline_since) == (
        "offline",
        T0 + 3,
    )


def test_a_cleared_heartbeat_forgets_the_node() -> None:
    v = view()
    beat(v, "a", T0, T0)
    v.on_message(Message(T.heartbeat("a"), b"", True))
    assert v.verdict("a", T0 + 1).state == "unknown" and "a" not in v.nodes()


def test_resume_gives_every_node_a_whole_timeout_from_the_reconnect() -> None:
    v = view()
    beat(v, "a", T0, T0)
    beat(v, "b", T0, T0)
    assert not v.verdict("a", T0 + 100).is_online
    v.resume(T0 + 100, listened_until=T0 + 5)
    assert v.verdict("a", T0 + 120).is_online and v.verdict("b", T0 + 120).is_online
    beat(v, "b", T0 + 110, T0 + 110)
    assert v.verdict("a", T0 + 125).offline_since == T0 + 120 and v.verdict("b", T0 + 125).is_online
    beat(v, "a", T0 + 50, T0 + 50, retained=True)  # a stale replay rewinds nothing
    assert v.verdict("a", T0 + 125).offline_since == T0 + 120


def test_resume_keeps_known_offline_nodes_offline_but_restarts_their_offline_time() -> None:
    v = view()
    beat(v, "silent", T0, T0)  # offline from T0 + 20
    beat(v, "willed", T0 + 30, T0 + 30)
    will(v, "willed", T0 + 31)
    will(v, "never", T0 + 2)
    beat(v, "up", T0 + 35, T0 + 35)
    v.resume(T0 + 200, listened_until=T0 + 40)
    for node in ("silent", "willed", "never"):
        verdict = v.verdict(node, T0 + 210)
        assert (verdict.state, verdict.offline_since) == ("offline", T0 + 200), node
    assert v.verdict("up", T0 + 210).is_online
    beat(v, "silent", T0 + 211, T0 + 211)
    assert v.verdict("silent", T0 + 212).is_online


def test_retained_heartbeats_are_aged_on_the_wall_clock_when_the_receivers_is_monotonic() -> None:
    clock = Clock(100.0)
    v = ActualView(T, timeout_s=20, clock=clock, wall=lambda: 5000.0)
    hb = {"ts": 5000.0 - 2, "seq": 1, "interval_s": 5, "host": HOST}
    v.on_message(Message(T.heartbeat("n"), json.dumps(hb).encode(), True))
    assert v.facts("n").heard_at == 98.0  # type: ignore[union-attr]
    old = hb | {"ts": 5000.0 - 90}
    v.on_message(Message(T.heartbeat("m"), json.dumps(old).encode(), True))
    assert v.offline(["n", "m"]) == {"m": "no heartbeat for 90 s"}


def test_listeners_hear_liveness_status_and_item_changes_once_each() -> None:
    clock = Clock()
    v = view(clock)
    told: list[Change] = []
    v.listen(told.append)
    beat(v, "a", T0, T0)
    beat(v, "a", T0 + 1, T0 + 1)  # still online: nothing to tell
    clock.now = T0 + 30
    assert [(c.node, c.before, c.verdict.state) for c in v.check() if c.verdict] == [
        ("a", "online", "offline")
    ]
    v.status("a", {"state": "online"}, received_at=clock.now)
    item = {"state": "running", "health": "healthy", "digest": "d1", "started_at": "s1"}
    v.item("a", "containers", "e.web.0", item)
    v.item("a", "containers", "e.web.0", item)  # the same again: no change
    v.item("a", "containers", "e.web.0", None)
    kinds = [(c.what, c.before, c.verdict.state if c.verdict else None) for c in told]
    assert kinds == [("liveness", None, "online"), ("liveness", "online", "offline"), ("status", None, None),
                     ("item", None, None), ("item", None, None)]  # fmt: skip
    assert told[3].item is not None and told[4].item is None and told[4].previous is not None


def test_an_item_is_healthy_since_we_first_saw_it_so_on_its_digest_and_start() -> None:
    clock = Clock()
    v = view(clock)
    doc = {"state": "running", "health": "healthy", "digest": "d1", "started_at": "s1", "restart_count": 0}
    v.item("a", "containers", "e.web.0", doc)
    clock.now += 10
    v.item("a", "containers", "e.web.0", doc | {"restart_count": 0})
    assert v.report("a", "containers", "e.web.0").healthy_since == T0  # type: ignore[union-attr]
    v.item("a", "containers", "e.web.0", doc | {"started_at": "s2"})  # it restarted: counting again
    assert v.report("a", "containers", "e.web.0").healthy_since == T0 + 10  # type: ignore[union-attr]
    v.item("a", "containers", "e.web.0", doc | {"health": "unhealthy"})
    assert v.report("a", "containers", "e.web.0").healthy_since is None  # type: ignore[union-attr]


def test_an_invalid_report_is_ignored_and_affects_only_its_sender() -> None:
    v = view()
    beat(v, "good", T0, T0)
    v.on_message(Message(T.heartbeat("bad"), b"{not json", False))
    v.on_message(Message(T.heartbeat("good"), json.dumps({"ts": "soon"}).encode(), False))
    v.on_message(Message(T.status("bad"), json.dumps({"state": 3}).encode(), True))
    v.on_message(Message("elsewhere/x", b"{}", False))
    assert set(v.nodes()) == {"good"} and v.verdict("good", T0 + 1).is_online


def test_a_replayed_retained_will_after_a_live_heartbeat_is_old_news() -> None:
    """A reader that subscribes twice (``phrame status`` reads the retained topics again) gets
    the retained will a second time after the node's live heartbeat: it changes nothing."""
    v = view()
    will(v, "a", T0)  # retained, as it begins listening
    beat(v, "a", T0 + 1, T0 + 1)  # heard live: back
    v.status("a", {"state": "offline"}, retained=True, received_at=T0 + 2)
    assert v.verdict("a", T0 + 3).is_online
    v.status("a", {"state": "offline"}, received_at=T0 + 4)  # a live will: it went away
    assert v.verdict("a", T0 + 5).state == "offline"


def test_due_says_when_a_verdict_may_next_change_by_time_alone() -> None:
    clock = Clock()
    v = view(clock)
    assert v.due(T0) == T0 + 20  # a node never heard would count as offline from here
    beat(v, "a", T0 + 5, T0 + 5)
    beat(v, "behind", T0 - 600, T0 + 5, retained=True, interval=2)  # waited for until T0 + 9
    assert v.due(T0 + 6) == T0 + 9
    assert v.due(T0 + 10) == T0 + 20
    assert v.due(T0 + 21) == T0 + 25  # a's heartbeat times out
    clock.now = T0 + 26
    assert [c.node for c in v.check()] == ["a"] and v.due(T0 + 26) is None


def test_a_heartbeat_keeps_every_fact_it_does_not_carry() -> None:
    """The heartbeat transition builds the node's facts field by field (it runs for every beat
    of a fleet): a field added to NodeFacts must not be dropped by it."""
    import dataclasses

    from phrame.actual.facts import with_heartbeat
    from phrame.actual.records import NodeFacts

    carried = {"heard_at", "trust", "received_at", "ts", "dated_age_s", "interval_s", "clock_offset_s"}
    before = NodeFacts(
        "n1", heard_at=1.0, trust="live", received_at=1.0, ts=1.0, dated_age_s=0.0, interval_s=5.0,
        clock_offset_s=0.0, offline_at=0.5, status={"state": "online"}, status_at=0.5,
    )  # fmt: skip
    after = with_heartbeat(before, 9.0, 5.0, received_at=9.0, dated_age_s=0.0, retained=True, timeout_s=20)
    assert after is not None and after.offline_at is None  # heard after its will: back
    for field in dataclasses.fields(NodeFacts):
        if field.name not in carried | {"offline_at"}:
            assert getattr(after, field.name) == getattr(before, field.name), field.name


def test_live_beats_of_an_online_node_tell_no_one_and_a_beat_after_silence_does() -> None:
    clock = Clock()
    v = view(clock)
    told: list[Change] = []
    v.listen(told.append)
    beat(v, "n1", clock.now, clock.now)
    for _ in range(5):
        clock.now += 5
        beat(v, "n1", clock.now, clock.now)
    assert [(c.what, c.verdict.state) for c in told if c.verdict] == [("liveness", "online")]
    clock.now += 30
    assert [c.verdict.state for c in v.check() if c.verdict] == ["offline"]
    clock.now += 1
    beat(v, "n1", clock.now, clock.now)
    assert [c.verdict.state for c in told if c.verdict] == ["online", "offline", "online"]
    will(v, "n1", clock.now + 1)  # a will, then a beat: offline and back, each told
    beat(v, "n1", clock.now + 2, clock.now + 2)
    assert [c.verdict.state for c in told if c.verdict] == [
        "online",
        "offline",
        "online",
        "offline",
        "online",
    ]


def test_a_heartbeat_json_cannot_carry_is_ignored_and_affects_only_its_sender() -> None:
    """Valid under the schema but not strict JSON: an infinite number, an array 900 deep."""
    v = view()
    beat(v, "good", T0, T0)
    host = json.dumps(HOST).encode()
    inf = b'{"ts": 1000, "seq": 1, "interval_s": 5, "host": ' + host[:-1] + b', "mem_total": 1e999}}'
    v.on_message(Message(T.heartbeat("inf"), inf, False))
    deep = (
        b'{"ts": 1000, "seq": 1, "interval_s": 5, "host": '
        + host
        + b', "x": '
        + b"[" * 900
        + b"]" * 900
        + b"}"
    )
    v.on_message(Message(T.heartbeat("deep"), deep, False))
    assert set(v.nodes()) == {"good"} and v.verdict("good", T0 + 1).is_online


def test_a_command_reply_on_the_actual_plane_is_neither_an_item_nor_invalid(caplog: Any) -> None:
    """A log command's reply lives under the node's actual subtree: the view leaves it out
    without calling it an invalid report."""
    v = view()
    told: list[Change] = []
    v.listen(told.append)
    reply = {"id": "c1", "node": "a", "item": "e.web.0", "at": T0, "lines": ["x"], "truncated": False}
    v.on_message(Message(T.reply("a", "c1"), json.dumps(reply).encode(), False))
    assert told == [] and v.report("a", "containers", "e.web.0") is None
    assert "invalid" not in caplog.text
    assert T.parse(T.logs("a", "e.web.0")).kind == "logs" and T.is_reply(T.reply("a", "c1"))
    assert not T.is_reply("phrame/actual/nodes/a/replies/bad id") and not T.is_reply(T.status("a"))
