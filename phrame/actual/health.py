"""The health of a deployment: one pure function from desired state, actual plane and placement.

Config-sync's ``phrame/deploy`` and its ``deploys`` records call :func:`assess`; ``phrame
status``, the topic API and the dashboard show the word and the reasons it gave (they read
the record, they never judge again). States, worst first: ``failed`` (cannot get there: a
pull, create or mount error, a port taken, on the replica's own report; a staged rollout
that failed; errors of the node itself, such as a full disk or its Docker daemon away, are
no failure of the deployment: it waits for them, within the deploy timeout), ``degraded``
(runs, but not as desired: a replica unassigned, crash-looping or unhealthy), ``unknown``
(a node that should run something is not reporting), ``suspended`` (waiting for promotion),
``progressing``, ``healthy``. Never healthy while a desired replica is unassigned or not
running. No I/O, no clock: every input is handed in.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

FAILED, DEGRADED, UNKNOWN, SUSPENDED, PROGRESSING, HEALTHY = (
    "failed",
    "degraded",
    "unknown",
    "suspended",
    "progressing",
    "healthy",
)
STATES = (FAILED, DEGRADED, UNKNOWN, SUSPENDED, PROGRESSING, HEALTHY)  # worst first
CRASH_LOOP_RESTARTS = 3  # restarts on the new spec that count as crash-looping
#: what the node agent's errors say of trouble of the node itself, which it retries and which
#: passes without a new commit: its Docker daemon not answering (a restart, an outage) or its
#: disk full. The deployment waits for them (within the deploy timeout); it has not failed.
PASSING = ("Docker unreachable", "no Docker daemon answers", "No space left on device")


def is_passing(error: str) -> bool:
    """Whether a node agent's error names trouble of the node itself (:data:`PASSING`)."""
    return any(marker in error for marker in PASSING)


#: ``phrame/deploy``'s word for each state (GitLab's commit status)
DEPLOY_STATUS = {
    FAILED: "failed",
    DEGRADED: "failed",
    UNKNOWN: "running",
    SUSPENDED: "running",
    PROGRESSING: "running",
    HEALTHY: "success",
}


@dataclass(frozen=True)
class Replica:
    """A replica the deployment wants: on ``node`` (``None``: unassigned), with ``digest``
    (``None``: any digest its node converged on)."""

    replica: str
    node: str | None
    digest: str | None = None


@dataclass(frozen=True)
class NodeSeen:
    """A node the deployment changed, as heard: ``liveness`` by the shared node rule
    (``online``, ``offline``, ``unknown``) and why; ``converged`` on the generation published
    for the deployment (or a later one); ``errors`` it reported since the deployment began."""

    liveness: str = "online"
    why: str = ""
    converged: bool = False
    errors: tuple[str, ...] = ()
    at: str = ""  # where it is instead (commit, generation), for a reason


@dataclass(frozen=True)
class Reason:
    node: str
    replica: str
    reason: str

    def to_doc(self) -> dict[str, str]:
        return {"node": self.node, "replica": self.replica, "reason": self.reason}

    def text(self) -> str:
        where = " ".join(p for p in (self.node, self.replica) if p)
        return f"{where}: {self.reason}" if where else self.reason


@dataclass(frozen=True)
class Health:
    state: str
    reasons: tuple[Reason, ...] = ()

    @property
    def deploy_status(self) -> str:
        """``running``, ``success`` or ``failed`` for ``phrame/deploy``."""
        return DEPLOY_STATUS[self.state]

    @property
    def is_final(self) -> bool:
        """Healthy, failed or degraded: the deployment's verdict (waiting cannot help)."""
        return self.state in (HEALTHY, FAILED, DEGRADED)

    def text(self) -> str:
        """One line: ``failed: edge-01 web.0: pull access denied`` (the first reason)."""
        return self.state + (f": {self.reasons[0].text()}" if self.reasons else "")

    def to_doc(self) -> dict[str, Any]:
        return {"health": self.state, "reasons": [r.to_doc() for r in self.reasons]}


def assess(
    replicas: Sequence[Replica],
    nodes: Mapping[str, NodeSeen],
    reports: Mapping[str, Mapping[str, Any]],
    *,
    fresh: Collection[str] = (),
    unassigned: Mapping[str, str] | None = None,
    rollouts: Sequence[Mapping[str, Any]] = (),
    settled: Collection[str] | None = None,
) -> Health:
    """The deployment's health.

    ``replicas``: what it wants; ``nodes``: node -> how each node it changed is heard;
    ``reports``: replica -> its node's ``actual/.../containers/<id>`` report; ``fresh``: the
    replicas whose report came after the deployment began (only their ``error`` counts: an
    older one is about an earlier spec); ``unassigned``: replica -> why placement found no
    node for it; ``rollouts``: the staged rollouts of the deployment not complete
    (``{"service", "state", "reasons"}`` as the ``sync`` topic's ``rollouts``); ``settled``:
    the replicas seen running (and healthy) long enough without a restart to trust it
    (``None``: do not wait for that), so a crash loop is seen before it is called healthy."""
    found: dict[str, list[Reason]] = {s: [] for s in STATES}
    placed = unassigned or {}
    for r in replicas:
        if r.node is None:
            if r.replica in placed:
                found[DEGRADED].append(Reason("", r.replica, f"unassigned: {placed[r.replica]}"))
            else:
                found[PROGRESSING].append(Reason("", r.replica, "waiting for placement to assign a node"))
    for node, seen in sorted(nodes.items()):
        if seen.converged:
            continue
        if seen.errors and not is_passing(seen.errors[0]):
            found[FAILED].append(Reason(node, "", seen.errors[0]))
        elif seen.liveness != "online":
            found[UNKNOWN].append(Reason(node, "", f"not reporting ({seen.liveness}: {seen.why})"))
        elif seen.errors:  # the node's own trouble (its disk, its Docker daemon): it keeps trying
            found[PROGRESSING].append(Reason(node, "", f"not converged yet: {seen.errors[0]}"))
        else:
            found[PROGRESSING].append(
                Reason(node, "", f"not converged yet{f' (at {seen.at})' if seen.at else ''}")
            )
    for r in replicas:
        if r.node is None:
            continue
        steady = None if settled is None else r.replica in settled
        state, why = _replica(r, nodes.get(r.node), reports.get(r.replica), r.replica in fresh, steady)
        if state is not None:
            found[state].append(Reason(r.node, r.replica, why))
    for rollout in rollouts:
        state = str(rollout.get("state"))
        service = str(rollout.get("service"))
        word = {"waiting-promotion": SUSPENDED, "paused": FAILED, "rolled-back": FAILED}.get(
            state, PROGRESSING
        )
        causes = [
            Reason(str(c.get("node", "")), str(c.get("replica", "")), f"{state}: {c.get('reason', '')}")
            for c in rollout.get("reasons") or ()
            if isinstance(c, Mapping)
        ]
        found[word].extend(causes or [Reason("", service, f"staged rollout {state}")])
    for state in STATES[:-1]:
        if found[state]:
            return Health(state, tuple(found[state]))
    return Health(HEALTHY)


def _replica(
    r: Replica, node: NodeSeen | None, report: Mapping[str, Any] | None, fresh: bool, steady: bool | None
) -> tuple[str | None, str]:
    """One placed replica's state and why (``None``: healthy, or said by its node already)."""
    error = report.get("error") if report is not None else None
    if fresh and isinstance(error, str) and error:
        if is_passing(error):  # the node's trouble, not the replica's: it retries
            return PROGRESSING, error
        return FAILED, error
    if node is not None and not node.converged:
        return None, ""  # its node's own reason says it
    if report is None:  # its node converged on a manifest holding it: the node vouches for it
        return None, ""
    if r.digest is not None and report.get("digest") != r.digest:
        return (
            None,
            "",
        )  # its node converged on a later spec of it (another commit's): not this one's to judge
    state, health = report.get("state"), report.get("health")
    restarts = report.get("restart_count")
    if isinstance(restarts, int) and not isinstance(restarts, bool) and restarts >= CRASH_LOOP_RESTARTS:
        return DEGRADED, f"crash-looping: restarted {restarts} times"
    if health == "unhealthy":
        return DEGRADED, "healthcheck unhealthy"
    if state == "restarting":  # Docker's restart policy at work: a crash loop once it restarted 3 times
        return PROGRESSING, f"restarting (restarted {restarts or 0} times)"
    if state != "running":
        return DEGRADED, f"not running ({state}, exit code {report.get('exit_code')})"
    if health == "starting":
        return PROGRESSING, "healthcheck starting"
    if steady is False:
        return PROGRESSING, "running, not long enough yet to tell it is not crash-looping"
    return None, ""
