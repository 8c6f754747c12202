"""One item report taken in: how long it has been healthy, on the receiver's clock.

Called by :class:`phrame.actual.view.ActualView` for every ``actual/nodes/<node>/<kind>/<id>``
report. ``healthy_since`` is the receiver's clock when it first saw the item running and
healthy on its current digest and start, never the node's: a retained report read after a
restart starts the count again (a rollout never jumps ahead); ``running_since`` and
``state_since`` likewise. Pure: never reads a clock.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from phrame.actual.records import ItemReport


def next_report(
    before: ItemReport | None, node: str, kind: str, item_id: str, doc: Mapping[str, Any], now: float
) -> ItemReport:
    """The report that replaces ``before`` for ``doc`` received at ``now``."""
    report = ItemReport(node, kind, item_id, doc, now)
    # its start on this digest: kept across restarts, so a restarting replica does not push a
    # rollout's deadline back
    digest = report.text("digest")
    running = before.running_since if before is not None and before.text("digest") == digest else None
    if running is None and doc.get("state") == "running":
        running = now
    # since when it has been in this state on this digest (its health, error or restarts aside)
    state = report.text("state")
    kept = before is not None and (before.text("digest"), before.text("state")) == (digest, state)
    state_since = before.state_since if kept and before is not None else now
    since = None
    if report.is_healthy:
        # the same container, healthy since we last looked: the count goes on; a new digest or
        # a restart (another started_at) starts it again
        same = before is not None and (before.text("digest"), before.started_at) == (
            digest,
            report.started_at,
        )
        since = before.healthy_since if same and before is not None else None
        since = now if since is None else since
    return ItemReport(node, kind, item_id, doc, now, since, running, state_since)


def same_state(a: ItemReport | None, b: ItemReport | None) -> bool:
    """Whether two reports say the same (their arrival time aside): no change to tell."""
    if a is None or b is None:
        return a is b
    return (a.doc, a.healthy_since, a.running_since, a.state_since) == (
        b.doc,
        b.healthy_since,
        b.running_since,
        b.state_since,
    )
