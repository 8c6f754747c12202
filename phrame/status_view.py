"""What ``phrame status`` shows: the fleet's nodes and environments from retained topics.

Pure: (topic → payload, now) → a summary and its verdict. Invalid payloads are shown as
such, never trusted. The caller reads the broker; this module never does I/O.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from schemas import PayloadError, Topics, check_payload, load_json


@dataclass
class NodeRow:
    node: str
    state: str = "unknown"
    converged: bool | None = None
    generation: int | None = None
    commit: str | None = None
    heartbeat_age_s: float | None = None
    errors: list[str] = field(default_factory=list)


@dataclass
class EnvironmentRow:
    environment: str
    ref: str | None = None
    ok: bool | None = None
    last_applied: str | None = None
    last_attempted: str | None = None
    errors: list[str] = field(default_factory=list)
    unassigned: list[str] = field(default_factory=list)
    gc_candidates: list[str] = field(default_factory=list)


@dataclass
class Summary:
    nodes: list[NodeRow]
    environments: list[EnvironmentRow]

    @property
    def is_healthy(self) -> bool:
        nodes_ok = all(n.state == "online" and n.converged and not n.errors for n in self.nodes)
        envs_ok = all(e.ok is not False and not e.unassigned for e in self.environments)
        return nodes_ok and envs_ok

    def to_dict(self) -> dict[str, Any]:
        return {"healthy": self.is_healthy, **asdict(self)}


def _doc(topic_schema: str, raw: bytes) -> dict[str, Any] | str:
    """The payload, or a one-line reason it cannot be trusted."""
    try:
        doc = load_json(raw)
        check_payload(topic_schema, doc)
    except (ValueError, PayloadError) as e:
        return f"invalid payload: {e}"
    result: dict[str, Any] = doc
    return result


def _error_text(error: Any) -> str:
    if isinstance(error, dict):
        where = ":".join(str(error[k]) for k in ("file", "line") if k in error)
        return f"{where}: {error.get('message', '')}" if where else str(error.get("message", error))
    return str(error)


def summarize(retained: dict[str, bytes], now: float, topics: Topics) -> Summary:
    nodes: dict[str, NodeRow] = {}
    envs: dict[str, EnvironmentRow] = {}
    for topic, raw in retained.items():
        try:
            t = topics.parse(topic)
        except ValueError:
            continue
        if t.kind not in ("status", "heartbeat", "sync", "placement"):
            continue
        doc = _doc(t.schema_name, raw)
        if t.node is not None:
            row = nodes.setdefault(t.node, NodeRow(t.node))
            if isinstance(doc, str):
                row.errors.append(f"{t.kind}: {doc}")
            elif t.kind == "status":
                row.state = doc["state"]
                row.converged = doc.get("converged")
                row.generation = doc.get("generation")
                row.commit = doc.get("commit")
                row.errors += [_error_text(e) for e in doc.get("errors", [])]
            else:
                row.heartbeat_age_s = round(max(0.0, now - float(doc["ts"])), 1)
            continue
        assert t.environment is not None
        env = envs.setdefault(t.environment, EnvironmentRow(t.environment))
        if isinstance(doc, str):
            env.errors.append(f"{t.kind}: {doc}")
        elif t.kind == "sync":
            env.ref = doc.get("ref")
            env.ok = doc.get("ok")
            env.last_applied = (doc.get("last_applied") or {}).get("commit")
            env.last_attempted = (doc.get("last_attempted") or {}).get("commit")
            env.errors += [_error_text(e) for e in doc.get("errors", [])]
        else:
            env.unassigned = [f"{u['replica']}: {u['reason']}" for u in doc.get("unassigned", [])]
            env.gc_candidates = list(doc.get("gc_candidates", []))
    return Summary(
        sorted(nodes.values(), key=lambda n: n.node), sorted(envs.values(), key=lambda e: e.environment)
    )


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    return str(value)


def render_text(summary: Summary) -> str:
    lines = ["NODE            STATE    CONVERGED  GEN    COMMIT        HEARTBEAT"]
    for n in summary.nodes:
        age = "-" if n.heartbeat_age_s is None else f"{n.heartbeat_age_s:g}s ago"
        commit = (n.commit or "-")[:12]
        lines.append(
            f"{n.node:<15} {n.state:<8} {_cell(n.converged):<10} {_cell(n.generation):<6} {commit:<13} {age}"
        )
        lines += [f"    error: {e}" for e in n.errors]
    if not summary.nodes:
        lines.append("(no node has reported)")
    lines += ["", "ENVIRONMENT     REF            SYNC  APPLIED       ATTEMPTED"]
    for e in summary.environments:
        applied, attempted = (e.last_applied or "-")[:12], (e.last_attempted or "-")[:12]
        lines.append(f"{e.environment:<15} {_cell(e.ref):<14} {_cell(e.ok):<5} {applied:<13} {attempted}")
        lines += [f"    error: {x}" for x in e.errors]
        lines += [f"    unassigned: {u}" for u in e.unassigned]
        lines += [
            f"    node {g} has been offline past PHRAME_NODE_GC_S: remove it from nodes/?"
            for g in e.gc_candidates
        ]
    if not summary.environments:
        lines.append("(no environment has been synced)")
    lines.append("")
    lines.append("healthy" if summary.is_healthy else "needs attention")
    return "\n".join(lines)
