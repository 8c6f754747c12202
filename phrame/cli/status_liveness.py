"""How ``phrame status`` judges a node's liveness on its own clock: by heartbeats it hears live.

:mod:`phrame.cli.cmd_status` reads the retained topics, then listens for live heartbeats
(:class:`phrame.cli.status_listen.LiveHeartbeats`) until :func:`undecided` is empty or its
``--timeout`` ends; :mod:`phrame.cli.status_view` asks :func:`judge` for each node. A heartbeat
heard live is aged from when it arrived, so a node whose clock is off is online all the
same. A node not heard is offline once this host heard nothing from it for longer than the
timeout; before that its retained heartbeat's ``ts`` is trusted only when it agrees with
the silence we heard (dated at least that long ago): a node a beat late stays online, and a
heartbeat dated later than that comes from a clock ahead and says ``unknown``, never online.
Pure: never reads a clock, never does I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from schemas.node_health import NodeVerdict, judge_node

#: how long to wait for a node not heard yet: this many of its intervals, plus the grace
MISSED_FACTOR, MISSED_GRACE_S = 1.5, 1.0
DEFAULT_INTERVAL_S = 5.0  # PHRAME_HEARTBEAT_S's default, for a node whose heartbeat says none
CLOCK_NOTE_S = 2.0  # a smaller offset is latency and jitter: not worth a line, nor distrust


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
    """How long to listen for a node beating every ``interval_s`` that was not heard yet."""
    return (interval_s or DEFAULT_INTERVAL_S) * MISSED_FACTOR + MISSED_GRACE_S


def is_ahead(node: Retained, listen: Listen, now: float) -> bool:
    """Its retained heartbeat is dated later than our own silence allows: it was sent before we
    listened, so a clock that agrees with ours dates it at least ``listened_s`` ago."""
    return node.ts is not None and now - node.ts < listen.listened_s - CLOCK_NOTE_S


def judge(
    node: Retained, beat: LiveBeat | None, listen: Listen | None, now: float, timeout_s: float
) -> NodeVerdict:
    """The node's verdict at ``now`` (the reader's clock, at or after ``listen.ended_at``)."""
    if beat is not None and listen is not None:
        # its retained status predates the listen: a live heartbeat after it outweighs a will
        return judge_node(node.status, beat.received_at, now, timeout_s, status_at=listen.started_at)
    if listen is None or node.ts is None or node.says_offline:
        return judge_node(node.status, node.ts, now, timeout_s)  # by its clock; unknown; its will
    if listen.listened_s > timeout_s:
        reason = f"no heartbeat for {listen.listened_s:.0f} s (none heard while listening)"
        return NodeVerdict("offline", reason, listen.listened_s)
    if is_ahead(node, listen, now):
        # only our own silence can tell, and it was shorter than the timeout
        when = f"{node.ts - now:.0f} s from now" if node.ts > now else f"{now - node.ts:.0f} s ago"
        reason = (
            f"no heartbeat in the {listen.listened_s:.0f} s listened, and its last is dated "
            f"{when} by its own clock, which is ahead of this host's"
        )
        return NodeVerdict("unknown", reason, listen.listened_s)
    # a clock that agrees with our silence: a node a beat or two late is still online
    return judge_node(node.status, node.ts, now, timeout_s)


def is_decided(node: Retained, beat: LiveBeat | None, listen: Listen, now: float, timeout_s: float) -> bool:
    """Whether listening longer could not change the node's verdict (or is not worth it)."""
    if beat is not None or node.says_offline or listen.listened_s > timeout_s:
        return True
    if node.ts is None or is_ahead(node, listen, now):
        return False  # a first heartbeat may come; a clock ahead: only our silence can tell
    return listen.listened_s >= missed_after(node.interval_s)  # a late beat had its chance


def undecided(nodes: Mapping[str, Retained], listen: Listen, now: float, timeout_s: float) -> list[str]:
    """The nodes worth listening for still (``now``: the reader's clock)."""
    return sorted(
        name
        for name, node in nodes.items()
        if not is_decided(node, listen.live.get(name), listen, now, timeout_s)
    )


def clock_note(offset_s: float | None) -> str | None:
    """``clock 600 s behind this host`` for a node's clock visibly off (``offset_s``:
    :attr:`LiveBeat.clock_offset_s`), else None."""
    if offset_s is None or abs(offset_s) < CLOCK_NOTE_S:
        return None
    side = "ahead of" if offset_s > 0 else "behind"
    return f"clock {abs(offset_s):.0f} s {side} this host"
