"""How one report changes what is known of a node: the pure transitions of :class:`NodeFacts`.

Called by :class:`phrame.actual.view.ActualView` under its lock, with every time already on
the receiver's clock. A live heartbeat counts from its arrival; a retained one from its own
``ts`` (never later than its arrival) unless only the node's clock vouches for it; a will
holds until a heartbeat heard after it. Pure: never reads a clock; ``None``: nothing changes.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from phrame.actual.records import CLOCK_NOTE_S, NodeFacts, Trust


def with_heartbeat(
    facts: NodeFacts, ts: float, interval_s: float | None, *, received_at: float, dated_age_s: float,
    retained: bool, timeout_s: float,
) -> NodeFacts | None:  # fmt: skip
    """After a heartbeat sent at ``ts`` that said it was ``dated_age_s`` old on arrival."""
    trust: Trust
    at, offset = facts.heard_at, facts.clock_offset_s
    if not retained:
        trust, at, offset = "live", received_at, -dated_age_s
    elif dated_age_s > timeout_s or dated_age_s < -CLOCK_NOTE_S:
        if facts.heard_at is not None:
            return None  # we heard it better already: an old copy says nothing new
        trust = "behind" if dated_age_s > 0 else "ahead"
    else:
        trust, at = "retained", received_at - max(0.0, dated_age_s)
    if at is not None and facts.heard_at is not None and at < facts.heard_at:
        return None  # an older heartbeat never rewinds a newer one
    offline_at = facts.offline_at
    if at is not None and offline_at is not None and at >= offline_at:
        offline_at = None  # heard after its will: it came back
    # built field by field, not with dataclasses.replace: this runs for every beat of a fleet
    return NodeFacts(
        facts.node, heard_at=at, trust=trust, received_at=received_at, ts=ts, dated_age_s=dated_age_s,
        interval_s=interval_s, clock_offset_s=offset, offline_at=offline_at, status=facts.status,
        status_at=facts.status_at,
    )  # fmt: skip


def with_status(
    facts: NodeFacts, doc: Mapping[str, Any] | None, *, received_at: float, retained: bool
) -> NodeFacts | None:
    """After a status (``None``: cleared, which says nothing of its liveness). A retained copy
    of the status held already is a replay (a second subscription): old news."""
    if retained and doc is not None and facts.status == doc:
        return None
    state = None if doc is None else doc.get("state")
    changed = facts.status is None or facts.status.get("state") != state
    offline_at = facts.offline_at
    if state == "offline":
        offline_at = offline_at if offline_at is not None else received_at  # a repeated will keeps the first
    elif doc is not None:
        offline_at = None
    status_at = received_at if changed else facts.status_at
    return dataclasses.replace(facts, status=doc, status_at=status_at, offline_at=offline_at)


def resumed(facts: NodeFacts, now: float, *, listened_until: float | None, timeout_s: float) -> NodeFacts:
    """We hear the plane again from ``now``: a whole timeout from ``now`` before the node counts
    as offline, unless it was already (silent for a timeout at ``listened_until``, or its will);
    then it stays offline, its offline time restarting at ``now``."""
    offline_at = facts.offline_at
    if facts.heard_at is None:
        return facts if offline_at is None else dataclasses.replace(facts, offline_at=max(offline_at, now))
    silent_for = None if listened_until is None else listened_until - facts.heard_at
    if (silent_for is not None and silent_for > timeout_s) or offline_at is not None:
        offline_at = max(offline_at or now, now)
    return dataclasses.replace(facts, heard_at=max(facts.heard_at, now), offline_at=offline_at)
