"""What ``phrame status`` shows of staged rollouts: one row per retained ``rollouts/<service>``.

:func:`phrame.cli.status_view.summarize` hands each valid payload (schema ``desired-rollout``,
written by config-sync's rollout gate) to :func:`rollout_row`; :func:`rollout_lines` writes
them under their environment. Pure. A rollout that is paused or rolled back keeps its commit
from being applied, so the fleet then needs attention (exit 1); one progressing or waiting
for a promotion does not.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

HELD = ("paused", "rolled-back")  # the commit is not applied: someone must act


def rollout_row(doc: dict[str, Any]) -> dict[str, Any]:
    """The fields status shows (the JSON output carries them as they are)."""
    keep = ("service", "commit", "state", "wave", "waves", "done", "total", "description")
    row = {k: doc.get(k) for k in keep}
    row["reasons"] = [
        f"{r.get('node')} {r.get('replica')}: {r.get('reason')}" for r in doc.get("reasons", [])
    ]
    return row


def is_held(row: dict[str, Any]) -> bool:
    return row.get("state") in HELD


def head_state(commit: str, rows: list[dict[str, Any]]) -> str:
    """Why the head ``commit`` is not the environment's applied one: its rollout is still going
    (or was stopped), else it did not deploy at all (validation, fetch: the errors say)."""
    mine = [r for r in rows if r.get("commit") == commit and r.get("state") != "complete"]
    if any(is_held(r) for r in mine):
        return "not applied: its rollout stopped (see the rollout)"
    if mine:
        return "rolling out (see the rollout)"
    return "not deployed (see the errors)"


def hold_text(environment: str, commit: str, hold: dict[str, Any]) -> str:
    """Why the head is held whole (the ``sync`` topic's ``hold``) and what releases it:
    ``suspended (waiting-approval): 1/2 approvals (alice): phrame approve prod 0a1b2c3d4e5f``."""
    approvals = hold.get("approvals") or {}
    who = list(approvals.get("by") or [])
    count = f"{len(who)}/{approvals.get('needed', 0)} approvals" + (f" ({', '.join(who)})" if who else "")
    if hold.get("reason") == "frozen":
        until = hold.get("until")
        end = (
            datetime.fromtimestamp(float(until), UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
            if isinstance(until, (int, float))
            else "unknown"
        )
        return (
            f"suspended (frozen) until {end}: deploys then, or "
            f"phrame approve {environment} {commit[:12]} --override-freeze"
        )
    return f"suspended (waiting-approval): {count}: phrame approve {environment} {commit[:12]}"


def rollout_lines(environment: str, rows: list[dict[str, Any]]) -> list[str]:
    """``rollout web: progressing, wave 2/4, 1/4 healthy, commit 0a1b2c3d4e5f`` and its reasons."""
    lines = []
    for r in sorted(rows, key=lambda r: str(r.get("service"))):
        if r.get("state") == "complete":
            continue  # history, not news: the deploys lines say it
        commit = str(r.get("commit") or "")[:12]
        lines.append(
            f"    rollout {r.get('service')}: {r.get('state')}, wave {r.get('wave')}/{r.get('waves')}, "
            f"{r.get('done')}/{r.get('total')} healthy, commit {commit}"
        )
        if r.get("state") == "waiting-promotion":
            how = f"phrame promote {environment} {r.get('service')}"
            lines.append(f"        waiting for a promotion: {how}, or a new commit")
        lines += [f"        {why}" for why in r.get("reasons", [])]
    return lines
