"""Feeding :class:`phrame.actual.ActualView` by hand in tests: heartbeats and wills at given
clock values (no broker), and placement's reading of a view built on a fake clock."""

from __future__ import annotations

from collections.abc import Callable

from phrame.actual import ActualView
from placement.health import PlacementHealth
from schemas import Topics


def placement_health(
    *, timeout_s: float, started_at: float, clock: Callable[[], float] | None = None
) -> PlacementHealth:
    """Placement's reading of a fresh view (``clock``: the receiver's, default fixed at ``started_at``)."""
    view = ActualView(
        Topics(), timeout_s=timeout_s, clock=clock or (lambda: started_at), started_at=started_at
    )
    return PlacementHealth(view)


def heartbeat(
    live: PlacementHealth | ActualView,
    node: str,
    ts: float,
    *,
    received_at: float,
    is_retained: bool = False,
    interval_s: float = 5.0,
) -> None:
    """A heartbeat of ``node`` sent at ``ts`` (its clock) and received at ``received_at``."""
    view = live.view if isinstance(live, PlacementHealth) else live
    view.heartbeat(node, {"ts": ts, "interval_s": interval_s}, retained=is_retained, received_at=received_at)


def status(live: PlacementHealth | ActualView, node: str, state: str, *, received_at: float) -> None:
    view = live.view if isinstance(live, PlacementHealth) else live
    view.status(node, {"state": state}, received_at=received_at)
