"""How ``phrame status`` judges a node's liveness on its own clock: by heartbeats it hears live.

:mod:`phrame.cmd_status` reads the retained topics, then listens for live heartbeats
(:class:`phrame.status_listen.LiveHeartbeats`) until :func:`undecided` is empty or its
``--timeout`` ends; :mod:`phrame.status_view` asks :func:`judge` for each node. A heartbeat
heard live is aged from when it arrived, so a node whose clock is off is online all the
same; a node not heard is offline once it stayed silent longer than the timeout on this
host's clock, or missed a beat and its last heartbeat is dated older than that. The node's
``ts`` alone never makes it online once we listened long enough to hear it. Pure: never
reads a clock, never does I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from schemas.node_health import NodeVerdict, judge_node

#: a node that sent nothing for this many of its intervals (plus the grace) missed a beat
MISSED_FACTOR, MISSED_GRACE_S = 1.5, 1.0
DEFAULT_INTERVAL_S = 5.0  # PHRAME_HEARTBEAT_S's default, for a node whose heartbeat says none
CLOCK_NOTE_S = 2.0  # a smaller offset is latency and jitter, not worth a line


@dataclass(frozen=True)
class LiveBeat:
    """A heartbeat heard live (not a retained copy): when it arrived on the reader's clock."""

    received_at: float
    ts: float  # the node's own clock when it sent it
    interval_s: float

    @property
    def clock_offset_s(self) -> float:
        """How far the node's clock is ahead of the reader's (negative: behind), give or take
        the message's latency."""
        return self.ts - self.received_at


@dataclass(frozen=True)
class Listen:
    """What the reader heard live between ``started_at`` and ``ended_at`` (its own clock)."""

    started_at: float
    ended_at: float
    live: Mapping[str, LiveBeat] = field(default_factory=dict)

    @property
    def listened_s(self) -> float:
        return max(0.0, self.ended_at - self.started_at)


@dataclass(frozen=True)
class Retained:
    """A node's retained status and heartbeat, as read before listening."""

    status: Mapping[str, Any] | None = None
    ts: float | None = None  # the retained heartbeat's ``ts`` (its clock)
    interval_s: float | None = None

    @property
    def says_offline(self) -> bool:
        return self.status is not None and self.status.get("state") == "offline"


def missed_after(interval_s: float | None) -> float:
    """Seconds of silence after which a node beating every ``interval_s`` missed a beat."""
    return (interval_s or DEFAULT_INTERVAL_S) * MISSED_FACTOR + MISSED_GRACE_S


def judge(
    node: Retained, beat: LiveBeat | None, listen: Listen | None, now: float, timeout_s: float
) -> NodeVerdict:
    """The node's verdict at ``now`` (the reader's clock, at or after ``listen.ended_at``)."""
    if beat is not None and listen is not None:
        # its retained status predates the listen: a live heartbeat after it outweighs a will
        return judge_node(node.status, beat.received_at, now, timeout_s, status_at=listen.started_at)
    listened = listen.listened_s if listen is not None else 0.0
    if node.ts is None or node.says_offline:
        return judge_node(node.status, node.ts, now, timeout_s)  # unknown, or offline by its will
    by_its_clock = max(0.0, now - node.ts)
    if listened > timeout_s:
        reason = f"no heartbeat for {listened:.0f} s (none heard while listening)"
        return NodeVerdict("offline", reason, max(listened, by_its_clock))
    if listened < missed_after(node.interval_s):
        # not listened (a caller without a broker) or too briefly to tell (a short
        # --timeout): its own clock is all there is
        return judge_node(node.status, node.ts, now, timeout_s)
    if by_its_clock > timeout_s:
        reason = (
            f"no heartbeat for {by_its_clock:.0f} s by its own clock, none in the {listened:.0f} s listened"
        )
        return NodeVerdict("offline", reason, by_its_clock)
    reason = (
        f"no heartbeat in the {listened:.0f} s listened though it beats every "
        f"{node.interval_s or DEFAULT_INTERVAL_S:g} s; its last is dated {by_its_clock:.0f} s ago "
        "by its own clock (is its clock ahead?)"
    )
    return NodeVerdict("unknown", reason, by_its_clock)


def is_decided(
    node: Retained, beat: LiveBeat | None, listened_s: float, now: float, timeout_s: float
) -> bool:
    """Whether listening longer could not change the node's verdict."""
    if beat is not None or node.says_offline:
        return True
    if listened_s > timeout_s:
        return True
    if node.ts is None:
        return False  # a status without a heartbeat: its first heartbeat may come
    return listened_s >= missed_after(node.interval_s) and now - node.ts > timeout_s


def undecided(nodes: Mapping[str, Retained], listen: Listen, now: float, timeout_s: float) -> list[str]:
    """The nodes worth listening for still (``now``: the reader's clock)."""
    return sorted(
        name
        for name, node in nodes.items()
        if not is_decided(node, listen.live.get(name), listen.listened_s, now, timeout_s)
    )


def clock_note(offset_s: float | None) -> str | None:
    """``clock 600 s behind this host`` for a node's clock visibly off (``offset_s``:
    :attr:`LiveBeat.clock_offset_s`), else None."""
    if offset_s is None or abs(offset_s) < CLOCK_NOTE_S:
        return None
    side = "ahead of" if offset_s > 0 else "behind"
    return f"clock {abs(offset_s):.0f} s {side} this host"
