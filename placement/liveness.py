"""Node liveness from the actual plane: heartbeat age and the retained ``status``.

The loop feeds every heartbeat/status message in (from the MQTT network thread) and asks
for :meth:`Liveness.health` at a clock value before each decision. A node is offline when
its last heartbeat is older than ``PHRAME_NODE_TIMEOUT_S`` or its status says ``offline``
(the agent's last will): the shared rule, :func:`schemas.node_health.judge_node`; a node
never heard from, the disruption and the reconnect grace are placement's own. After a
(re)connect that may have missed messages the loop calls :meth:`Liveness.resume`, and so
does :meth:`Liveness.note_decision` when a full disruption ends, so time spent not hearing
the fleet never reads as nodes going offline. Never acts on an invalid payload; never reads
the clock itself.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Collection, Iterable
from dataclasses import dataclass

from phrame.placement_rules.models import NodeHealth
from schemas.node_health import judge_node

log = logging.getLogger(__name__)


@dataclass
class _Seen:
    last_heartbeat: float | None = None
    offline_at: float | None = None  # when a status "offline" arrived after the last heartbeat


@dataclass(frozen=True)
class _Disruption:
    """Decisions over one inventory held because not one of its nodes was alive."""

    noticed_at: float  # the first pass that found no node alive
    last_heard: float | None  # the last heartbeat of any of its nodes then: when it began


class Liveness:
    """Thread-safe record of when each node was last heard from."""

    def __init__(self, *, timeout_s: float, started_at: float) -> None:
        self.timeout_s = timeout_s
        self.started_at = started_at  # a node never heard from is offline from here + timeout
        self._seen: dict[str, _Seen] = {}
        self._disrupted: dict[str, _Disruption] = {}  # per scope (environment) of note_decision
        self._unconfirmed: dict[str, float] = {}  # node -> until when a live heartbeat may confirm it
        self._lock = threading.Lock()

    def unconfirmed(self, now: float) -> dict[str, float]:
        """Nodes heard of only through a retained heartbeat dated past the timeout, and still
        within a beat and a half of it: node -> until when (a first decision waits for them)."""
        with self._lock:
            return {n: until for n, until in self._unconfirmed.items() if until > now}

    def heartbeat(
        self, node: str, ts: float, *, received_at: float, is_retained: bool, interval_s: float = 5.0
    ) -> None:
        """A heartbeat. A live one counts from its arrival (immune to clock skew); a retained
        one from its own ``ts`` (never later than its arrival), so a stale retained heartbeat
        of a dead node does not make it look alive after a restart of the reconciler. A
        retained one dated more than a timeout before its arrival is ignored: the node is not
        alive, but how long it has been silent is only its clock's word (a live node whose
        clock is behind looks the same), so it counts as never heard, offline a timeout after
        we started listening (fault case 7: no replica moves on a node's clock's word),
        and it is :meth:`unconfirmed` until a live one comes or 1.5 ``interval_s`` + 1 s pass."""
        if is_retained and received_at - ts > self.timeout_s:
            with self._lock:
                seen = self._seen.setdefault(node, _Seen())
                if seen.last_heartbeat is None:
                    self._unconfirmed[node] = received_at + 1.5 * interval_s + 1.0
            return
        seen_at = min(ts, received_at) if is_retained else received_at
        with self._lock:
            if not is_retained:
                self._unconfirmed.pop(node, None)
            state = self._seen.setdefault(node, _Seen())
            if state.last_heartbeat is None or seen_at >= state.last_heartbeat:
                state.last_heartbeat = seen_at
                if state.offline_at is not None and seen_at >= state.offline_at:
                    state.offline_at = None

    def status(self, node: str, state: str, *, received_at: float) -> None:
        with self._lock:
            seen = self._seen.setdefault(node, _Seen())
            if state == "offline":
                if seen.offline_at is None:
                    seen.offline_at = received_at
            else:
                seen.offline_at = None

    def resume(self, now: float, *, listened_until: float | None = None) -> None:
        """We hear the actual plane again from ``now`` (a first connect or a reconnect).

        Time spent not listening is never evidence that a node is down: every node gets a
        whole timeout of silence from ``now`` before it counts as offline, and a never-seen
        node a timeout from ``now``. A node we already knew to be offline at
        ``listened_until`` (the last moment we know we were listening), or whose will said
        so, stays offline (nothing new goes there) but its grace period restarts at ``now``."""
        with self._lock:
            self.started_at = max(self.started_at, now)
            for seen in self._seen.values():
                if seen.last_heartbeat is None:
                    if seen.offline_at is not None:
                        seen.offline_at = max(seen.offline_at, now)
                    continue
                silent_for = None if listened_until is None else listened_until - seen.last_heartbeat
                if (silent_for is not None and silent_for > self.timeout_s) or seen.offline_at is not None:
                    seen.offline_at = max(seen.offline_at or now, now)
                seen.last_heartbeat = max(seen.last_heartbeat, now)

    def note_decision(self, scope: str, nodes: Collection[str], now: float) -> None:
        """A decision over ``nodes`` (``scope``: the environment deciding) is about to read
        :meth:`health` at ``now``: enter or leave a full disruption first (a command; the
        caller then asks :meth:`health`).

        While not one of ``nodes`` is alive the decision holds (a full disruption, see
        :func:`phrame.placement_rules.decide.decide`); it is remembered here with the last heartbeat heard
        from any of them, when the disruption began. On the first call that finds one alive
        again, every node gets a whole timeout from ``now`` (:meth:`resume` with
        ``listened_until`` = that moment), as Kubernetes' node controller does on leaving
        full-disruption mode: the nodes not back yet (agents reconnect with backoff) do not
        read as offline since the disruption and lose their replicas to the first node back,
        while a node already silent for a timeout before it began stays offline."""
        if not nodes:
            return
        health = self.health(nodes, now)
        if not any(h.alive for h in health.values()):
            with self._lock:
                if scope not in self._disrupted:
                    beats = [s.last_heartbeat for n in nodes if (s := self._seen.get(n)) is not None]
                    last = max((b for b in beats if b is not None), default=None)
                    self._disrupted[scope] = _Disruption(noticed_at=now, last_heard=last)
            return
        with self._lock:
            disruption = self._disrupted.pop(scope, None)
        if disruption is None:
            return
        log.warning(
            "%s: a node is alive again after a full disruption noticed %.0f s ago; every node "
            "gets a whole timeout from now",
            scope,
            now - disruption.noticed_at,
        )
        self.resume(now, listened_until=disruption.last_heard)

    def last_heard(self) -> dict[str, float | None]:
        """Every node heard of: when its last heartbeat counts from (None: a status only)."""
        with self._lock:
            return {node: seen.last_heartbeat for node, seen in self._seen.items()}

    def forget(self, node: str) -> None:
        with self._lock:
            self._seen.pop(node, None)

    def health(self, nodes: Iterable[str], now: float) -> dict[str, NodeHealth]:
        with self._lock:
            return {n: self._health(self._seen.get(n), now) for n in nodes}

    def _health(self, seen: _Seen | None, now: float) -> NodeHealth:
        if seen is None or seen.last_heartbeat is None:
            # Never heard from: not alive (nothing new goes there), and offline, as for any
            # node, once a whole timeout has passed without a heartbeat since we started.
            since = self.started_at + self.timeout_s
            if seen is not None and seen.offline_at is not None:
                since = min(since, seen.offline_at)
            return NodeHealth(alive=False, offline_since=since)
        # the per-node rule is the shared one; only the never-heard grace above and the
        # disruption and reconnect handling (resume) are placement's own
        status = None if seen.offline_at is None else {"state": "offline"}
        verdict = judge_node(status, seen.last_heartbeat, now, self.timeout_s, status_at=seen.offline_at)
        if verdict.is_online:
            return NodeHealth(alive=True)
        return NodeHealth(alive=False, offline_since=verdict.offline_since)


def gc_candidates(health: dict[str, NodeHealth], now: float, gc_after_s: float) -> list[str]:
    """Inventory nodes offline for longer than ``PHRAME_NODE_GC_S``: candidates for removal."""
    return sorted(n for n, h in health.items() if not h.alive and h.offline_for(now) > gc_after_s)
