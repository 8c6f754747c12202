"""What ``phrame status`` shows: the fleet's nodes and environments from retained topics.

Pure: (topic → payload, now) → a summary and its verdict. Invalid payloads are shown as
such, never trusted. The caller reads the broker; this module never does I/O.
A node's STATE is the shared actual view's verdict (:class:`phrame.actual.ActualView`) on the
reader's clock: the caller feeds it the retained topics and the live heartbeats it heard;
a heartbeat heard live is aged from its arrival, so a node whose clock is off is online all
the same, and a node not heard is offline once the reader heard nothing from it for longer
than the timeout (its own ``ts`` counts only when it agrees with that silence).
An environment shows the commit it runs (its ``sync`` topic); a node shows whether it
applied its own manifest, not that manifest's commit: a node the last commits did not
touch keeps an older manifest commit and is up to date all the same. The terminal's text
is :mod:`phrame.cli.status_text`'s.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, NamedTuple

from phrame.actual import ActualView
from phrame.cli.status_rollouts import is_held, rollout_row
from schemas import PayloadError, Topics, check_payload, load_json
from schemas.container_exits import DEFAULT_WINDOW_S, recent_exit
from schemas.node_health import presence

DEFAULT_NODE_TIMEOUT_S = 20.0  # as placement's PHRAME_NODE_TIMEOUT_S


@dataclass
class NodeRow:
    node: str
    state: str = "unknown"  # online | offline | unknown, by the shared node-health rule
    reason: str | None = None  # why that state ("no heartbeat for 45 s")
    # the state as a person reads it: offline split into disconnected (silent, within the
    # longest disconnect grace of its environments) and offline (schemas.node_health.presence)
    presence: str = "unknown"
    said_offline: dict[str, Any] | None = None  # its status, when that says offline (how: reason)
    converged: bool | None = None
    generation: int | None = None  # applied, as the node's status says
    commit: str | None = None  # of the manifest it applied (not the environment's commit)
    heartbeat_age_s: float | None = None  # on the reader's clock when heard live
    heard_live: bool = False  # a heartbeat arrived while the reader listened
    clock_offset_s: float | None = None  # its clock ahead (+) or behind (-) the reader's, if heard
    errors: list[str] = field(default_factory=list)
    desired_generation: int | None = None  # of the manifest published for it (None: unknown)
    applied: bool | None = None  # converged at desired_generation; None: no manifest or status
    environments: list[str] = field(default_factory=list)  # those with items on this node
    is_reporting: bool = False  # a status or heartbeat was seen
    # containers running again after an exit within the window: said, not unhealthy
    recent_exits: list[str] = field(default_factory=list)
    # a failing container's last lines, as its report carries them (item id -> lines)
    logs: dict[str, list[str]] = field(default_factory=dict)

    @property
    def needs_attention(self) -> bool:
        if not self.is_reporting and not self.environments and not self.errors:
            return False  # an inventory node with nothing to run and no agent yet
        is_ok = self.state == "online" and self.converged and not self.errors
        return not is_ok or self.applied is False


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
    disconnect_grace_s: float | None = None  # placement's wait on a silent node, as it states it
    nodes: list[str] = field(default_factory=list)  # nodes with items of this environment
    not_applied: list[str] = field(default_factory=list)  # of those, not converged on theirs
    deploys: list[dict[str, Any]] = field(default_factory=list)  # the last deployments, newest first
    rollouts: list[dict[str, Any]] = field(default_factory=list)  # staged rollouts (status_rollouts)
    hold: dict[str, Any] | None = None  # the head held whole: approvals, a freeze (the sync topic's)

    @property
    def commit(self) -> str | None:
        """The commit the environment runs: its last valid one."""
        return self.last_applied


@dataclass
class Summary:
    nodes: list[NodeRow]
    environments: list[EnvironmentRow]

    @property
    def is_healthy(self) -> bool:
        nodes_ok = not any(n.needs_attention for n in self.nodes)
        envs_ok = all(
            e.ok is not False and not e.unassigned and not any(is_held(r) for r in e.rollouts)
            for e in self.environments
        )
        return nodes_ok and envs_ok

    def to_dict(self) -> dict[str, Any]:
        doc = asdict(self)
        for env, row in zip(doc["environments"], self.environments, strict=True):
            env["commit"] = row.commit
        return {"healthy": self.is_healthy, **doc}


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


def _exit_line(item_id: str, raw: bytes, now: float, window_s: float) -> str | None:
    """``web.0: exit code 137, 12 s ago, restarted by the agent`` for a recent exit, else None."""
    doc = _doc("actual-item", raw)
    seen = recent_exit(doc, now=now, window_s=window_s) if isinstance(doc, dict) else None
    if seen is None:
        return None
    code = "exit code unknown" if seen["exit_code"] is None else f"exit code {seen['exit_code']}"
    by = f", restarted by the {seen['restarted_by']}" if seen["restarted_by"] else ""
    return f"{item_id}: {code}, {seconds_text(seen['age_s'])} ago{by}"


def _log_lines(raw: bytes) -> list[str]:
    """A container report's ``logs`` lines (none when it carries none or is invalid)."""
    doc = _doc("actual-item", raw)
    logs = doc.get("logs") if isinstance(doc, dict) else None
    return list(logs["lines"]) if isinstance(logs, dict) else []


class _Copy(NamedTuple):
    """A retained message as the view takes it (without importing the MQTT client)."""

    topic: str
    payload: bytes
    retain: bool = True


def retained_view(retained: dict[str, bytes], topics: Topics, now: float, timeout_s: float) -> ActualView:
    """The actual view of the retained topics alone, read at ``now`` (no listening: a
    retained heartbeat counts from its own ``ts``, when that agrees with ``now``)."""
    view = ActualView(topics, timeout_s=timeout_s, clock=lambda: now, started_at=now, log_invalid=False)
    for topic, raw in retained.items():
        if topic.endswith(("/status", "/heartbeat")) and "/actual/" in topic:
            view.on_message(_Copy(topic, raw))
    return view


def summarize(
    retained: dict[str, bytes],
    now: float,
    topics: Topics,
    timeout_s: float = DEFAULT_NODE_TIMEOUT_S,
    recent_exit_s: float = DEFAULT_WINDOW_S,
    *,
    view: ActualView | None = None,
) -> Summary:
    """``view``: the actual view the caller fed with ``retained``'s statuses and heartbeats
    and the live heartbeats it heard (None: it did not listen; the retained heartbeats are
    then aged by their own ``ts``)."""
    nodes: dict[str, NodeRow] = {}
    envs: dict[str, EnvironmentRow] = {}
    for topic, raw in retained.items():
        try:
            t = topics.parse(topic)
        except ValueError:
            continue
        if t.kind == "containers" and t.plane == "actual" and t.node and t.item_id:
            line = _exit_line(t.item_id, raw, now, recent_exit_s)
            if line is not None:
                nodes.setdefault(t.node, NodeRow(t.node)).recent_exits.append(line)
            lines = _log_lines(raw)
            if lines:
                nodes.setdefault(t.node, NodeRow(t.node)).logs[t.item_id] = lines
            continue
        if t.kind not in ("status", "heartbeat", "manifest", "sync", "placement", "deploys", "rollout"):
            continue
        doc = _doc(t.schema_name, raw)
        if t.node is not None:
            row = nodes.setdefault(t.node, NodeRow(t.node))
            row.is_reporting |= t.kind != "manifest"
            if isinstance(doc, str):
                row.errors.append(f"{t.kind}: {doc}")
            elif t.kind == "manifest":
                row.desired_generation = doc["generation"]
                row.environments = sorted({_environment_of(item) for item in doc["items"]})
            elif t.kind == "status":
                row.converged = doc.get("converged")
                row.generation = doc.get("generation")
                row.commit = doc.get("commit")
                row.errors += [_error_text(e) for e in doc.get("errors", [])]
                row.said_offline = dict(doc) if doc.get("state") == "offline" else None
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
            env.hold = doc.get("hold")
            env.errors += [_error_text(e) for e in doc.get("errors", [])]
        elif t.kind == "deploys":
            env.deploys = list(doc["deploys"])
        elif t.kind == "rollout":
            env.rollouts.append(rollout_row(doc))
        else:
            env.unassigned = [f"{u['replica']}: {u['reason']}" for u in doc.get("unassigned", [])]
            env.gc_candidates = list(doc.get("gc_candidates", []))
            grace = doc.get("disconnect_grace_s")
            env.disconnect_grace_s = float(grace) if isinstance(grace, int | float) else None
    view = view or retained_view(retained, topics, now, timeout_s)
    heard = view.nodes()
    for name, live in heard.items():
        if live.is_heard_live:  # a node first heard live (its retained topics cleared)
            nodes.setdefault(name, NodeRow(name)).is_reporting = True
    for row in nodes.values():
        row.recent_exits.sort()
        facts = heard.get(row.node)
        if facts is not None:
            verdict = view.verdict(row.node, now)
            row.state, row.reason = verdict.state, verdict.reason
            graces = [g for e in row.environments if (g := _grace(envs.get(e))) is not None]
            row.presence = presence(verdict, row.said_offline, now, max(graces, default=None))
            if verdict.heartbeat_age_s is not None:
                row.heartbeat_age_s = round(verdict.heartbeat_age_s, 1)
        if facts is not None and facts.is_heard_live and facts.clock_offset_s is not None:
            row.heard_live, row.clock_offset_s = True, round(facts.clock_offset_s, 1)
        if row.desired_generation is not None and row.converged is not None:  # both sides known
            row.applied = row.converged is True and row.generation == row.desired_generation
        for name in row.environments:
            env = envs.setdefault(name, EnvironmentRow(name))
            env.nodes.append(row.node)
            if not row.applied:
                env.not_applied.append(row.node)
    for env in envs.values():
        env.rollouts.sort(key=lambda r: str(r.get("service")))
        env.nodes.sort()
        env.not_applied.sort()
    return Summary(
        sorted(nodes.values(), key=lambda n: n.node), sorted(envs.values(), key=lambda e: e.environment)
    )


def _grace(env: EnvironmentRow | None) -> float | None:
    return None if env is None else env.disconnect_grace_s


def _environment_of(item: str) -> str:
    """``containers/<env>.<service>.<replica>`` (or a network, a process) → ``<env>``."""
    return item.partition("/")[2].partition(".")[0]


def seconds_text(value: float) -> str:
    """``12 s``, ``2.5 s``: an age or a duration as status shows it."""
    return f"{value:.0f} s" if value >= 10 else f"{value:.1f} s"
