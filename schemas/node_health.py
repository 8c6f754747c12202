"""The one rule for whether a node is online: its heartbeat's age and its retained status.

Called by the shared actual view (:mod:`phrame.actual.judging`), which placement, config-sync's
deploy tracking and rollouts, and ``phrame status`` all read, so "offline" means the same
thing everywhere. Pure: the caller says when the last heartbeat was heard and what time it
is, on one clock: the moment the caller *received* the heartbeat on its own clock, so a
node's clock skew never shifts the age; only a heartbeat already retained when a reader
starts is dated by its ``ts``. Never reads a clock, never does I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

State = Literal["online", "offline", "unknown"]
#: a verdict as a person reads it: ``offline`` split into ``disconnected`` (silent without a
#: goodbye, within the disconnect grace: presumably still running) and ``offline``
Presence = Literal["online", "disconnected", "offline", "unknown"]


@dataclass(frozen=True)
class NodeVerdict:
    """The judgement on one node at one clock value.

    ``offline_since``: when it became offline on the caller's clock (``None`` unless offline
    and known); ``heartbeat_age_s``: seconds since the last heartbeat (``None``: never heard)."""

    state: State
    reason: str
    heartbeat_age_s: float | None = None
    offline_since: float | None = None

    @property
    def is_online(self) -> bool:
        return self.state == "online"


def judge_node(
    status: Mapping[str, Any] | None,
    heard_at: float | None,
    now: float,
    timeout_s: float,
    *,
    status_at: float | None = None,
) -> NodeVerdict:
    """Online, offline or unknown, and why.

    ``status``: the node's retained status payload (only its ``state`` is read), ``None``
    when there is none; ``heard_at``: when its last heartbeat was heard (``None``: never);
    ``status_at``: when that status was received, if known. A status ``offline`` (the agent's
    last will) counts unless a heartbeat was heard after it; a heartbeat older than
    ``timeout_s`` makes the node offline whatever its status says. Offline for both reasons:
    offline since the earlier of the two."""
    age = None if heard_at is None else max(0.0, now - heard_at)
    says_offline = status is not None and status.get("state") == "offline"
    if says_offline and heard_at is not None and status_at is not None and heard_at > status_at:
        says_offline = False  # the will is older than the last heartbeat: the node came back
    stale = heard_at is not None and now - heard_at > timeout_s
    since: list[float] = []
    if stale:
        assert heard_at is not None
        since.append(heard_at + timeout_s)
    if says_offline and status_at is not None:
        since.append(status_at if heard_at is None else max(status_at, heard_at))
    if stale:
        reason = f"no heartbeat for {age:.0f} s"
        return NodeVerdict("offline", reason, age, min(since))
    if says_offline:
        return NodeVerdict("offline", "its status says offline", age, min(since, default=None))
    if heard_at is None:
        return NodeVerdict("unknown", "no heartbeat heard yet", None)
    return NodeVerdict("online", f"heartbeat {age:.0f} s ago", age)


def presence(
    verdict: NodeVerdict, status: Mapping[str, Any] | None, now: float, grace_s: float | None
) -> Presence:
    """``disconnected`` or ``offline`` for an offline verdict; the verdict's state otherwise.

    Disconnected: the node went silent without saying it stopped (its heartbeat timed out
    while its last status said online, or its status is the last will, ``reason: lost``) and
    has been offline for less than ``grace_s`` (the longest disconnect grace of the
    environments it runs; ``None``: not known, so offline). Offline: it said it stopped
    (``reason: stopped``, or an agent's status without a reason), or its silence outlasted
    the grace. Placement moves replicas by the verdict and the grace, never by this word."""
    if verdict.state != "offline":
        return verdict.state
    said = status.get("state") if status is not None else None
    if said == "offline" and (status or {}).get("reason") != "lost":
        return "offline"  # it said goodbye (or is too old an agent to say how it went)
    if grace_s is None or verdict.offline_since is None:
        return "offline"
    return "disconnected" if now - verdict.offline_since < grace_s else "offline"
