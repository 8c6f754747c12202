"""The deployment history of one environment, purely: add a record, judge, trim, (de)serialize.

:class:`config_sync.deploys.history.DeployHistory` keeps one list per environment (newest
first) and publishes it retained at ``<prefix>/desired/environments/<env>/deploys``. A new
record supersedes the environment's pending ones; a pending record is judged by the one
health function (:func:`phrame.actual.health.assess`, as ``phrame/deploy`` is): it converges
when healthy, is ``failed`` or ``degraded`` as soon as the health says so, and fails at its
deadline (time waiting for a promotion not counted) with the first node that did not
converge. It lists every node and replica the commit changed, over every wave of a staged
rollout. The newest record, once finished, is followed (:func:`follow`): its health word
tracks the environment's. No I/O, no clock (times are handed in).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from config_sync.deploys.verdict import first_failure, is_converged
from phrame.actual.health import FAILED as H_FAILED
from phrame.actual.health import HEALTHY, PROGRESSING, SUSPENDED, Health, NodeSeen, assess
from schemas import Topics
from schemas.topics import ITEM_KINDS

MAX_RECORDS = 20  # per environment, as the topic's contract says
PENDING, CONVERGED, FAILED, DEGRADED, SUPERSEDED = "pending", "converged", "failed", "degraded", "superseded"


@dataclass(frozen=True)
class DeployRecord:
    commit: str
    ref: str
    author: str
    message: str
    published_at: float
    nodes: Mapping[str, int] = field(default_factory=dict)  # node -> manifest generation published
    state: str = PENDING
    finished_at: float | None = None
    duration_s: float | None = None
    failed: tuple[str, str] | None = None  # (node, reason)
    replicas: Mapping[str, str | None] = field(default_factory=dict)  # replica -> node (None: unassigned)
    health: str = PROGRESSING  # the health function's word when last judged
    reasons: tuple[dict[str, str], ...] = ()  # its reasons: node, replica, reason
    waves: tuple[dict[str, Any], ...] = ()  # a staged rollout's waves: service, released_at, replicas, nodes
    suspended_s: float = 0.0  # time spent waiting for a promotion (not in ``duration_s``)
    suspended_since: float | None = None  # waiting for a promotion since (wall clock)
    approvals: tuple[dict[str, Any], ...] = ()  # who approved it (protected environment): by, at, via
    plan_changed: Mapping[str, Any] | None = None  # a merge whose plan is not the reviewed one

    @property
    def is_pending(self) -> bool:
        return self.state == PENDING

    def to_dict(self) -> dict[str, Any]:
        return {
            "commit": self.commit,
            "ref": self.ref,
            "author": self.author,
            "message": self.message,
            "published_at": self.published_at,
            "state": self.state,
            "finished_at": self.finished_at,
            "duration_s": self.duration_s,
            "nodes": dict(sorted(self.nodes.items())),
            "failed": None if self.failed is None else {"node": self.failed[0], "reason": self.failed[1]},
            "replicas": dict(sorted(self.replicas.items())),
            "health": self.health,
            "reasons": [dict(r) for r in self.reasons],
            "waves": [dict(w) for w in self.waves],
            "suspended_s": round(self.suspended_s, 3),
            "suspended_since": self.suspended_since,
            **({"approvals": [dict(a) for a in self.approvals]} if self.approvals else {}),
        } | ({"plan_changed": dict(self.plan_changed)} if self.plan_changed else {})

    @classmethod
    def from_dict(cls, doc: Mapping[str, Any]) -> DeployRecord:
        """A record from a payload that passed ``desired-deploys.schema.json``."""
        failed = doc.get("failed")
        return cls(
            commit=doc["commit"],
            ref=doc["ref"],
            author=doc["author"],
            message=doc["message"],
            published_at=float(doc["published_at"]),
            nodes=dict(doc.get("nodes") or {}),
            state=doc["state"],
            finished_at=doc.get("finished_at"),
            duration_s=doc.get("duration_s"),
            failed=None if not failed else (str(failed["node"]), str(failed["reason"])),
            replicas=dict(doc.get("replicas") or {}),
            health=doc.get("health") or _health_of_state(doc["state"]),
            reasons=tuple(dict(r) for r in doc.get("reasons") or ()),
            waves=tuple(dict(w) for w in doc.get("waves") or ()),
            suspended_s=float(doc.get("suspended_s") or 0.0),
            suspended_since=doc.get("suspended_since"),
            approvals=tuple(dict(a) for a in doc.get("approvals") or ()),
            plan_changed=doc.get("plan_changed"),
        )


def _health_of_state(state: str) -> str:
    """The health word of a record written before records carried one."""
    return {CONVERGED: HEALTHY, FAILED: H_FAILED}.get(state, PROGRESSING)


def finish(
    record: DeployRecord, state: str, at: float, failed: tuple[str, str] | None = None
) -> DeployRecord:
    """``record`` ended in ``state`` at ``at``: how long it worked counts for converged,
    degraded and failed (time waiting for a promotion apart); a superseded deployment never
    finished, so it has no duration."""
    record = _suspension(record, record.health == SUSPENDED, at)
    took = None if state == SUPERSEDED else round(max(0.0, at - record.published_at - record.suspended_s), 3)
    waves = _wave_times(record.waves, at) if took is not None else record.waves
    return replace(record, state=state, finished_at=at, duration_s=took, failed=failed, waves=waves)


def _wave_times(waves: Sequence[Mapping[str, Any]], end: float) -> tuple[dict[str, Any], ...]:
    """Each wave's working time: from its release to the next wave's (or the end), less the
    time it waited for a promotion."""
    starts = sorted(float(w["released_at"]) for w in waves)
    out = []
    for w in waves:
        at = float(w["released_at"])
        until = min((t for t in starts if t > at), default=end)
        waited = float(w.get("waited_s") or 0.0)
        out.append({**w, "waited_s": round(waited, 3), "took_s": round(max(0.0, until - at - waited), 3)})
    return tuple(out)


def _suspension(record: DeployRecord, suspended: bool, now: float) -> DeployRecord:
    """Count time waiting for a promotion: from when it began until it ends."""
    if suspended and record.suspended_since is None:
        return replace(record, suspended_since=now)
    if not suspended and record.suspended_since is not None:
        since = record.suspended_since
        waited = max(0.0, now - since)
        # the wait belongs to the wave released last before it began (the canary's)
        before = [w for w in record.waves if float(w["released_at"]) <= since]
        last = max(before, key=lambda w: float(w["released_at"]), default=None)
        waves = tuple(
            {**w, "waited_s": round(float(w.get("waited_s") or 0.0) + waited, 3)} if w is last else w
            for w in record.waves
        )
        return replace(record, suspended_s=record.suspended_s + waited, suspended_since=None, waves=waves)
    return record


def add(records: Sequence[DeployRecord], new: DeployRecord) -> list[DeployRecord]:
    """``new`` first, the environment's pending records superseded by it, at most
    :data:`MAX_RECORDS` kept. The newest record's own commit again (a republication of
    what is deployed) is no new deployment: ``records`` come back unchanged. A commit
    that changed no node (only the declared services) converges at once, unless a record
    it supersedes is still pending: then it waits for that one's nodes (as ``phrame/deploy``
    takes the older deployment over), so no node's convergence goes unreported."""
    if records and records[0].commit == new.commit:
        return [merge(records[0], new), *records[1:]]
    if not new.nodes:
        inherited: dict[str, int] = {}
        for r in records:
            for node, generation in r.nodes.items() if r.is_pending else ():
                inherited[node] = max(inherited.get(node, 0), generation)
        new = replace(new, nodes=inherited)
    older = [finish(r, SUPERSEDED, new.published_at) if r.is_pending else r for r in records]
    waiting = new.nodes or any(node is None for node in new.replicas.values())
    first = new if waiting else finish(replace(new, health=HEALTHY), CONVERGED, new.published_at)
    return [first, *older][:MAX_RECORDS]


def merge(record: DeployRecord, again: DeployRecord) -> DeployRecord:
    """A later publication of the same commit (a staged rollout's next wave): its nodes and
    replicas join a pending record; a finished one is left as it is."""
    if not record.is_pending:
        return record
    nodes = dict(record.nodes)
    for node, generation in again.nodes.items():
        nodes[node] = max(nodes.get(node, 0), generation)
    replicas = {**record.replicas, **again.replicas}
    waited = {(w["service"], w["wave"]): w.get("waited_s") for w in record.waves if w.get("waited_s")}
    waves = tuple(
        {**w, "waited_s": waited[(w["service"], w["wave"])]} if (w["service"], w["wave"]) in waited else w
        for w in again.waves or record.waves
    )
    return replace(record, nodes=nodes, replicas=replicas, waves=waves)


def judge(
    record: DeployRecord,
    statuses: Mapping[str, dict[str, Any]],
    *,
    now: float,
    deadline: float,
    ceilings: Mapping[str, int] | None = None,
    offline: Mapping[str, str] | None = None,
    health: Health | None = None,
) -> DeployRecord:
    """A pending ``record`` by ``health`` (without one: whether every node applied its
    generation): converged when healthy, failed or degraded as soon as it is so, failed at
    ``deadline`` (pushed back by the time waiting for a promotion) with the first node that
    did not converge; else pending with the health's word and reasons."""
    if not record.is_pending:
        return record
    if health is None:
        top = ceilings or {}
        seen = {
            n: NodeSeen(converged=is_converged(statuses.get(n), record.commit, g, top.get(n)))
            for n, g in record.nodes.items()
        }
        health = assess((), seen, {})
    judged = _suspension(record, health.state == SUSPENDED, now)
    if health.state != record.health or health.is_final:  # a pending record changes with its word only
        judged = replace(judged, health=health.state, reasons=tuple(r.to_doc() for r in health.reasons))
    first = health.reasons[0] if health.reasons else None
    named = (
        (first.node, f"{first.replica}: {first.reason}" if first.replica else first.reason) if first else None
    )
    if health.state == HEALTHY:
        return finish(judged, CONVERGED, now)
    if health.state in (H_FAILED, DEGRADED):
        return finish(judged, FAILED if health.state == H_FAILED else DEGRADED, now, named)
    waited = judged.suspended_s + (
        now - judged.suspended_since if judged.suspended_since is not None else 0.0
    )
    if health.state != SUSPENDED and now >= deadline + waited:
        found = first_failure(statuses, record.commit, record.nodes, ceilings, offline)
        return finish(judged, FAILED, now, found or named or ("", "did not converge"))
    return judged if judged != record else record


def follow(record: DeployRecord, health: Health) -> DeployRecord:
    """An environment's newest deployment after it finished, judged again: its ``health`` and
    ``reasons`` take a new verdict word (``healthy``, ``degraded``, ``failed``: a replica
    crash-looping long after it converged, and its recovery); a passing word (``progressing``,
    ``unknown``, ``suspended``: a container restarting, a node not heard yet) changes nothing,
    so a restart of config-sync or a blip never rewrites it. Its ``state`` (the deployment's
    verdict), times and ``failed`` stay as they are."""
    if (
        record.is_pending
        or record.state == SUPERSEDED
        or not health.is_final
        or health.state == record.health
    ):
        return record
    return replace(record, health=health.state, reasons=tuple(r.to_doc() for r in health.reasons))


def payload(environment: str, records: Sequence[DeployRecord]) -> dict[str, Any]:
    return {"environment": environment, "deploys": [r.to_dict() for r in records[:MAX_RECORDS]]}


def records_of(doc: Mapping[str, Any]) -> list[DeployRecord]:
    """The records of a payload that passed its schema, newest first."""
    return [DeployRecord.from_dict(d) for d in doc.get("deploys") or ()][:MAX_RECORDS]


def deployed_environments(
    messages: Sequence[tuple[str, bytes | None]], generations: Mapping[str, int], topics: Topics
) -> tuple[dict[str, dict[str, int]], set[str]]:
    """What one publication deployed: per environment whose desired state it changed
    (an item published or cleared, or a declared service), the nodes it changed there with
    their new manifest generations; and the environments it removed (``sync`` cleared)."""
    changed: dict[str, dict[str, int]] = {}
    gone: set[str] = set()
    for topic, raw in messages:
        try:
            parsed = topics.parse(topic)
        except ValueError:
            continue
        env = parsed.environment
        if env is None or parsed.plane != "desired":
            continue
        if parsed.kind == "sync":
            if not raw:
                gone.add(env)
            continue
        if parsed.kind not in (*ITEM_KINDS, "service"):
            continue
        nodes = changed.setdefault(env, {})
        if parsed.node is not None and parsed.node in generations:
            nodes[parsed.node] = generations[parsed.node]
    for env in gone:
        changed.pop(env, None)
    return changed, gone


def deployed_replicas(
    messages: Sequence[tuple[str, bytes | None]], topics: Topics, unassigned: Sequence[str] = ()
) -> dict[str, dict[str, str | None]]:
    """Per environment, the container replicas one publication gave a spec (replica ->
    node) and those of ``unassigned`` (item ids no node was assigned to: ``None``)."""
    out: dict[str, dict[str, str | None]] = {}
    for topic, raw in messages:
        try:
            parsed = topics.parse(topic)
        except ValueError:
            continue
        if parsed.plane != "desired" or parsed.kind != "containers" or not raw:
            continue
        if parsed.environment is not None and parsed.item_id is not None:
            out.setdefault(parsed.environment, {})[parsed.item_id] = parsed.node
    for item in unassigned:
        out.setdefault(item.split(".", 1)[0], {})[item] = None
    return out


def waves_of(states: Sequence[Mapping[str, Any]]) -> tuple[dict[str, Any], ...]:
    """The waves of staged rollouts (their retained documents): per service, the replicas
    released together, their nodes and when, in the order released."""
    waves: list[dict[str, Any]] = []
    for doc in states:
        by_time: dict[float, list[Mapping[str, Any]]] = {}
        for r in doc.get("replicas") or ():
            if r.get("released_at") is not None:
                by_time.setdefault(float(r["released_at"]), []).append(r)
        for n, at in enumerate(sorted(by_time), start=1):
            reps = by_time[at]
            waves.append(
                {
                    "service": str(doc.get("service")),
                    "wave": n,
                    "released_at": at,
                    "replicas": sorted(str(r["replica"]) for r in reps),
                    "nodes": sorted({str(r["node"]) for r in reps if r.get("node")}),
                }
            )
    return tuple(sorted(waves, key=lambda w: (w["released_at"], w["service"])))
