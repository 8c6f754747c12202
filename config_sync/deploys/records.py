"""The deployment history of one environment, purely: add a record, judge, trim, (de)serialize.

:class:`config_sync.deploys.history.DeployHistory` keeps one list per environment (newest
first) and publishes it retained at ``<prefix>/desired/environments/<env>/deploys``. A new
record supersedes the environment's pending ones; a pending record converges once every
node it changed applied its manifest generation (``deploy_verdict``, the rule the
``phrame/deploy`` status uses) and fails at its deadline with the first node that did not.
No I/O, no clock (times are handed in).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from config_sync.deploys.verdict import first_failure, waiting_for
from schemas import Topics
from schemas.topics import ITEM_KINDS

MAX_RECORDS = 20  # per environment, as the topic's contract says
PENDING, CONVERGED, FAILED, SUPERSEDED = "pending", "converged", "failed", "superseded"


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
        }

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
        )


def finish(
    record: DeployRecord, state: str, at: float, failed: tuple[str, str] | None = None
) -> DeployRecord:
    """``record`` ended in ``state`` at ``at``: how long it took counts for converged and
    failed; a superseded deployment never finished, so it has no duration."""
    took = None if state == SUPERSEDED else round(max(0.0, at - record.published_at), 3)
    return replace(record, state=state, finished_at=at, duration_s=took, failed=failed)


def add(records: Sequence[DeployRecord], new: DeployRecord) -> list[DeployRecord]:
    """``new`` first, the environment's pending records superseded by it, at most
    :data:`MAX_RECORDS` kept. The newest record's own commit again (a republication of
    what is deployed) is no new deployment: ``records`` come back unchanged. A commit
    that changed no node (only the declared services) converges at once, unless a record
    it supersedes is still pending: then it waits for that one's nodes (as ``phrame/deploy``
    takes the older deployment over), so no node's convergence goes unreported."""
    if records and records[0].commit == new.commit:
        return list(records)
    if not new.nodes:
        inherited: dict[str, int] = {}
        for r in records:
            for node, generation in r.nodes.items() if r.is_pending else ():
                inherited[node] = max(inherited.get(node, 0), generation)
        new = replace(new, nodes=inherited)
    older = [finish(r, SUPERSEDED, new.published_at) if r.is_pending else r for r in records]
    first = finish(new, CONVERGED, new.published_at) if not new.nodes else new
    return [first, *older][:MAX_RECORDS]


def judge(
    record: DeployRecord,
    statuses: Mapping[str, dict[str, Any]],
    *,
    now: float,
    deadline: float,
    ceilings: Mapping[str, int] | None = None,
    offline: Mapping[str, str] | None = None,
) -> DeployRecord:
    """A pending ``record`` converged when every node applied its generation (or a later
    one), failed at ``deadline`` with the first node that did not; else unchanged."""
    if not record.is_pending:
        return record
    if not waiting_for(statuses, record.commit, record.nodes, ceilings):
        return finish(record, CONVERGED, now)
    if now >= deadline:
        found = first_failure(statuses, record.commit, record.nodes, ceilings, offline)
        return finish(record, FAILED, now, found or ("", "did not converge"))
    return record


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
