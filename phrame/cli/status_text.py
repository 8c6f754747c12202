"""``phrame status``'s text: the summary of :mod:`phrame.cli.status_view` as the terminal shows it.

Pure: a :class:`~phrame.cli.status_view.Summary` (and ``now``, for the deploys' ages) in, lines
out; ``cmd_status`` prints it. The verdict line is the summary's own; nothing is judged here.
"""

from __future__ import annotations

from typing import Any

from phrame.actual.records import CLOCK_NOTE_S
from phrame.cli.status_rollouts import head_state, hold_text, rollout_lines
from phrame.cli.status_view import NodeRow, Summary, seconds_text

DEPLOYS_SHOWN = 4  # per environment in the text; --json has every retained one


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    return str(value)


def _generation(n: NodeRow) -> str:
    if n.desired_generation is None:
        return _cell(n.generation)
    return f"{_cell(n.generation)}/{n.desired_generation}"


def deploy_line(d: dict[str, Any], now: float | None) -> str:
    """``deploy 70b43d061e converged in 2.5 s: first line (Ada <ada@x>)``; the record's
    health word when it says more than its state (``pending, suspended for 2 min``); a merge
    whose plan is not the reviewed one ends ``[plan changed since review: !7]``."""
    flagged = d.get("plan_changed")
    mark = f" [plan changed since review: !{flagged['mr']}]" if isinstance(flagged, dict) else ""
    return _deploy_text(d, now) + mark


def _deploy_text(d: dict[str, Any], now: float | None) -> str:
    head = f"deploy {d['commit'][:10]}"
    said = f"{d['message']} ({d['author']})" if d["author"] else d["message"] or "(no message)"
    if d["state"] in ("failed", "degraded") and d.get("failed"):
        took = f" after {seconds_text(d['duration_s'])}" if d.get("duration_s") is not None else ""
        node = d["failed"]["node"]
        return f"{head} {d['state']}{took}{f' on {node}' if node else ''}: {d['failed']['reason']}"
    waited = d.get("suspended_s") or 0.0
    aside = f" (and {seconds_text(waited)} waiting for promotion)" if waited else ""
    if d["state"] == "converged" and d.get("duration_s") is not None:
        return f"{head} converged in {seconds_text(d['duration_s'])}{aside}: {said}"
    if d["state"] == "pending" and now is not None:
        health = d.get("health")
        word = f"pending, {health}" if health and health != "progressing" else "pending"
        return f"{head} {word} for {seconds_text(max(0.0, now - d['published_at']))}: {said}"
    return f"{head} {d['state']}: {said}"


def deploy_waves(d: dict[str, Any]) -> list[str]:
    """A staged rollout's waves, each with its working time and its wait for a promotion:
    ``waves: web 1 on n1 10 s (and 190 s waiting for promotion); web 2 on n2 20 s``."""
    parts = []
    for w in d.get("waves") or ():
        took = f" {seconds_text(w['took_s'])}" if w.get("took_s") is not None else ""
        waited = f" (and {seconds_text(w['waited_s'])} waiting for promotion)" if w.get("waited_s") else ""
        parts.append(f"{w['service']} {w['wave']} on {', '.join(w['nodes']) or '-'}{took}{waited}")
    return [f"waves: {'; '.join(parts)}"] if parts else []


def deploy_reasons(d: dict[str, Any], shown: int = 3) -> list[str]:
    """Why a pending deployment is not progressing as expected (its health's reasons)."""
    if d["state"] != "pending" or d.get("health") in (None, "progressing"):
        return []
    out = []
    for r in (d.get("reasons") or [])[:shown]:
        where = " ".join(p for p in (r.get("node"), r.get("replica")) if p)
        out.append(
            f"{d['health']}: {where}: {r.get('reason')}" if where else f"{d['health']}: {r.get('reason')}"
        )
    return out


def clock_note(offset_s: float | None) -> str | None:
    """``clock 600 s behind this host`` for a node's clock visibly off (``offset_s``: its
    clock ahead of this host's, from a heartbeat heard live), else None."""
    if offset_s is None or abs(offset_s) < CLOCK_NOTE_S:
        return None
    side = "ahead of" if offset_s > 0 else "behind"
    return f"clock {abs(offset_s):.0f} s {side} this host"


def render_text(summary: Summary, now: float | None = None) -> str:
    lines = ["NODE            STATE    CONVERGED  APPLIED  GEN      HEARTBEAT"]
    for n in summary.nodes:
        age = "-" if n.heartbeat_age_s is None else f"{n.heartbeat_age_s:g}s ago"
        converged, applied = _cell(n.converged), _cell(n.applied)
        lines.append(f"{n.node:<15} {n.state:<8} {converged:<10} {applied:<8} {_generation(n):<8} {age}")
        if n.presence == "disconnected":
            lines.append(f"    disconnected (still running, presumably; within its grace): {n.reason}")
        elif n.state != "online" and n.reason:
            lines.append(f"    {n.state}: {n.reason}")
        note = clock_note(n.clock_offset_s)
        if note:
            lines.append(f"    {note}")
        lines += [f"    error: {e}" for e in n.errors]
        lines += [f"    recent exit: {x}" for x in n.recent_exits]
        if n.logs:
            lines.append(f"    last lines of {', '.join(sorted(n.logs))}: phrame status --node {n.node}")
    if not summary.nodes:
        lines.append("(no node has reported)")
    lines += ["", "ENVIRONMENT     REF            SYNC  COMMIT        APPLIED ON"]
    for e in summary.environments:
        commit = (e.commit or "-")[:12]
        applied_on = f"{len(e.nodes) - len(e.not_applied)} of {len(e.nodes)} nodes"
        lines.append(f"{e.environment:<15} {_cell(e.ref):<14} {_cell(e.ok):<5} {commit:<13} {applied_on}")
        if e.last_attempted and e.hold:
            lines.append(
                f"    head {e.last_attempted[:12]} {hold_text(e.environment, e.last_attempted, e.hold)}"
            )
        elif e.last_attempted and e.last_attempted != e.last_applied:
            lines.append(f"    head {e.last_attempted[:12]} {head_state(e.last_attempted, e.rollouts)}")
        if e.not_applied:
            lines.append(f"    not applied yet on: {', '.join(e.not_applied)}")
        lines += [f"    error: {x}" for x in e.errors]
        lines += [f"    unassigned: {u}" for u in e.unassigned]
        lines += rollout_lines(e.environment, e.rollouts)
        for d in e.deploys[:DEPLOYS_SHOWN]:
            lines.append(f"    {deploy_line(d, now)}")
            lines += [f"      {r}" for r in (*deploy_reasons(d), *deploy_waves(d))]
        lines += [
            f"    node {g} has been offline past PHRAME_NODE_GC_S: remove it from nodes/?"
            for g in e.gc_candidates
        ]
    if not summary.environments:
        lines.append("(no environment has been synced)")
    lines.append("")
    lines.append("healthy" if summary.is_healthy else "needs attention")
    return "\n".join(lines)


def render_node(row: NodeRow, now: float | None = None) -> str:
    """``phrame status --node N``: the node's row as in the summary, then the last lines of
    each of its failing containers, as their reports carry them."""
    table = render_text(Summary([row], []), now).split("\n")
    nodes_part = table[: table.index("")]  # the node table ends with a blank line
    lines = [line for line in nodes_part if "phrame status --node" not in line]
    for item, tail in sorted(row.logs.items()):
        lines += ["", f"{item}: its last {len(tail)} line(s)"]
        lines += [f"    {line}" for line in tail]
    if not row.logs:
        lines += ["", "(none of its containers carries log lines: none is down, unhealthy or crash-looping)"]
    return "\n".join(lines)
