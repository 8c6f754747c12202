"""Placement's reading of the shared actual view: each node's health, and full disruptions.

The loop feeds the actual plane into one :class:`phrame.actual.ActualView` (liveness by the
shared rule on placement's clock, resumed after a reconnect by :mod:`placement.listening`);
the reconciler asks :meth:`PlacementHealth.health` before each decision, after
:meth:`PlacementHealth.note_decision`. What is placement's own: a node not online is not
alive (nothing new goes there), and a node never heard counts as offline a timeout after
we started listening; leaving a full disruption gives every node a whole timeout. Never
reads the clock itself and never acts on a report.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Iterable
from dataclasses import dataclass

from phrame.actual import ActualView
from phrame.placement_rules.models import NodeHealth

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class _Disruption:
    """Decisions over one inventory held because not one of its nodes was alive."""

    noticed_at: float  # the first pass that found no node alive
    last_heard: float | None  # the last heartbeat of any of its nodes then: when it began


class PlacementHealth:
    def __init__(self, view: ActualView) -> None:
        self.view = view
        self._disrupted: dict[str, _Disruption] = {}  # per scope (environment) of note_decision

    def health(self, nodes: Iterable[str], now: float) -> dict[str, NodeHealth]:
        out = {}
        for node, verdict in self.view.verdicts(nodes, now).items():
            if verdict.is_online:
                out[node] = NodeHealth(alive=True)
                continue
            since = verdict.offline_since if verdict.state == "offline" else None
            # not heard (or only on its own clock's word): offline a timeout after we listened
            out[node] = NodeHealth(
                alive=False, offline_since=since or self.view.started_at + self.view.timeout_s
            )
        return out

    def note_decision(self, scope: str, nodes: Collection[str], now: float) -> None:
        """A decision over ``nodes`` (``scope``: the environment deciding) is about to read
        :meth:`health` at ``now``: enter or leave a full disruption first (a command; the
        caller then asks :meth:`health`).

        While not one of ``nodes`` is alive the decision holds (a full disruption, see
        :func:`phrame.placement_rules.decide.decide`); it is remembered here with the last
        heartbeat heard from any of them, when the disruption began. On the first call that
        finds one alive again, every node gets a whole timeout from ``now`` (the view's
        ``resume`` with ``listened_until`` = that moment), as Kubernetes' node controller
        does on leaving full-disruption mode: the nodes not back yet (agents reconnect with
        backoff) do not read as offline since the disruption and lose their replicas to the
        first node back, while a node already silent for a timeout before it began stays offline."""
        if not nodes:
            return
        # alive is online (see health): the first online node ends the question, where the
        # whole fleet's health was judged for it each pass (10,000 verdicts, then again)
        if not any(self.view.verdict(n, now).is_online for n in nodes):
            if scope not in self._disrupted:
                beats = [f.heard_at for n in nodes if (f := self.view.facts(n)) is not None]
                last = max((b for b in beats if b is not None), default=None)
                self._disrupted[scope] = _Disruption(noticed_at=now, last_heard=last)
            return
        disruption = self._disrupted.pop(scope, None)
        if disruption is None:
            return
        log.warning(
            "%s: a node is alive again after a full disruption noticed %.0f s ago; every node "
            "gets a whole timeout from now",
            scope,
            now - disruption.noticed_at,
        )
        self.view.resume(now, listened_until=disruption.last_heard)


def gc_candidates(health: dict[str, NodeHealth], now: float, gc_after_s: float) -> list[str]:
    """Inventory nodes offline for longer than ``PHRAME_NODE_GC_S``: candidates for removal."""
    return sorted(n for n, h in health.items() if not h.alive and h.offline_for(now) > gc_after_s)
