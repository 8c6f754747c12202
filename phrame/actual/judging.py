"""The one liveness rule on the receiver's clock, over what :class:`ActualView` heard.

Pure: :func:`judge` takes a node's :class:`NodeFacts`, the clock value and when the
receiver (last) started listening, and applies :func:`schemas.node_health.judge_node` to a
heartbeat it can date on its own clock. A retained heartbeat whose ``ts`` is only the
node's clock's word (dated past the timeout, or ahead of its arrival) never makes a node
online: dated past the timeout it is offline, but its offline time counts only from a
timeout after we started listening (no replica moves on a node's clock's word); dated ahead
it is unknown until we heard nothing for a whole timeout. Never reads a clock.
"""

from __future__ import annotations

from phrame.actual.records import NodeFacts
from schemas.node_health import NodeVerdict, judge_node

#: how long to wait for a live heartbeat of a node not heard live yet: this many of its
#: intervals, plus the grace
MISSED_FACTOR, MISSED_GRACE_S = 1.5, 1.0
DEFAULT_INTERVAL_S = 5.0  # PHRAME_HEARTBEAT_S's default, for a node whose heartbeat says none


def missed_after(interval_s: float | None) -> float:
    """How long after its last (or only retained) heartbeat a node beating every
    ``interval_s`` has had its chance to be heard live."""
    return (interval_s or DEFAULT_INTERVAL_S) * MISSED_FACTOR + MISSED_GRACE_S


def judge(facts: NodeFacts | None, now: float, timeout_s: float, *, started_at: float) -> NodeVerdict:
    """Online, offline or unknown at ``now``, and why (``started_at``: since when the
    receiver has been listening without a gap)."""
    facts = facts or NodeFacts("")
    will = {"state": "offline"} if facts.offline_at is not None else None
    if facts.heard_at is not None:
        return judge_node(will, facts.heard_at, now, timeout_s, status_at=facts.offline_at)
    grace_end = started_at + timeout_s  # a node not heard counts as offline from here
    if will is not None:
        verdict = judge_node(will, None, now, timeout_s, status_at=facts.offline_at)
        since = min(grace_end, verdict.offline_since or grace_end)
        return NodeVerdict("offline", verdict.reason, None, since)
    received_at, dated = facts.received_at, facts.dated_age_s
    if facts.trust == "behind" and received_at is not None and dated is not None:
        age = dated + max(0.0, now - received_at)
        return NodeVerdict("offline", f"no heartbeat for {age:.0f} s", age, grace_end)
    listened = max(0.0, now - started_at)
    if facts.trust == "ahead" and received_at is not None and dated is not None:
        if listened > timeout_s:
            reason = f"no heartbeat for {listened:.0f} s (none heard while listening)"
            return NodeVerdict("offline", reason, listened, grace_end)
        ahead = -(dated + max(0.0, now - received_at))  # its ts minus our wall clock now
        when = f"{ahead:.0f} s from now" if ahead > 0 else f"{-ahead:.0f} s ago"
        reason = (
            f"no heartbeat in the {listened:.0f} s listened, and its last is dated "
            f"{when} by its own clock, which is ahead of this host's"
        )
        return NodeVerdict("unknown", reason, listened)
    return judge_node(None, None, now, timeout_s)  # never heard: unknown


def is_settled(facts: NodeFacts, now: float, timeout_s: float, *, started_at: float) -> bool:
    """Whether listening longer could not change the node's verdict (or is not worth it): heard
    live, its will, a whole timeout listened, or a retained heartbeat whose node had its chance
    to beat live. A node not heard at all, or dated ahead, only our own silence can tell."""
    listened = now - started_at
    if facts.is_heard_live or facts.says_offline or listened > timeout_s:
        return True
    if facts.trust in (None, "ahead"):
        return False
    return listened >= missed_after(facts.interval_s)  # a late beat had its chance


def is_unconfirmed(facts: NodeFacts, now: float) -> bool:
    """Only an untrusted retained heartbeat, and a live one may still come to confirm it."""
    if facts.trust not in ("behind", "ahead") or facts.received_at is None:
        return False
    return now < facts.received_at + missed_after(facts.interval_s)
