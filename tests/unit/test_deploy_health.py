"""The one health function of a deployment, as a table: desired, actual and placement in,
one state word and its reasons out."""

from __future__ import annotations

from typing import Any

import pytest

from phrame.actual.health import Health, NodeSeen, Replica, assess

WEB = Replica("prod.web.0", "n1", "sha256:new")
OK = NodeSeen(converged=True)
RUNNING = {"state": "running", "health": None, "digest": "sha256:new", "restart_count": 0}

CASES: list[tuple[str, dict[str, Any], str, str]] = [
    (
        "converged and running",
        dict(replicas=[WEB], nodes={"n1": OK}, reports={WEB.replica: RUNNING}),
        "healthy",
        "",
    ),
    (
        "unassigned, placement says why",
        dict(
            replicas=[Replica("prod.api.0", None)],
            nodes={},
            reports={},
            unassigned={"prod.api.0": "no node has gpu=true"},
        ),
        "degraded",
        "prod.api.0: unassigned: no node has gpu=true",
    ),
    (
        "unassigned, placement has not decided yet",
        dict(replicas=[Replica("prod.api.0", None)], nodes={}, reports={}),
        "progressing",
        "prod.api.0: waiting for placement to assign a node",
    ),
    (
        "pull error reported since the deploy began",
        dict(
            replicas=[WEB],
            nodes={
                "n1": NodeSeen(errors=("create prod.web.0: pull 127.0.0.1:9/absent:1: connection refused",))
            },
            reports={
                WEB.replica: {"state": "missing", "error": "pull 127.0.0.1:9/absent:1: connection refused"}
            },
            fresh={WEB.replica},
        ),
        "failed",
        "n1: create prod.web.0: pull 127.0.0.1:9/absent:1: connection refused",
    ),
    (
        "an item error from before the deploy counts for nothing",
        dict(
            replicas=[WEB],
            nodes={"n1": NodeSeen()},
            reports={WEB.replica: {"state": "missing", "error": "old"}},
        ),
        "progressing",
        "n1: not converged yet",
    ),
    (
        "item error only (port taken)",
        dict(
            replicas=[WEB],
            nodes={"n1": NodeSeen()},
            reports={WEB.replica: {"state": "created", "error": "port 8080 is already allocated"}},
            fresh={WEB.replica},
        ),
        "failed",
        "n1 prod.web.0: port 8080 is already allocated",
    ),
    (
        "crash loop on the new spec",
        dict(replicas=[WEB], nodes={"n1": OK}, reports={WEB.replica: {**RUNNING, "restart_count": 4}}),
        "degraded",
        "n1 prod.web.0: crash-looping: restarted 4 times",
    ),
    (
        "restarting once is no crash loop yet",
        dict(
            replicas=[WEB],
            nodes={"n1": OK},
            reports={WEB.replica: {**RUNNING, "state": "restarting", "restart_count": 1}},
        ),
        "progressing",
        "n1 prod.web.0: restarting (restarted 1 times)",
    ),
    (
        "exited and not restarted",
        dict(
            replicas=[WEB],
            nodes={"n1": OK},
            reports={WEB.replica: {**RUNNING, "state": "exited", "exit_code": 2}},
        ),
        "degraded",
        "n1 prod.web.0: not running (exited, exit code 2)",
    ),
    (
        "unhealthy",
        dict(replicas=[WEB], nodes={"n1": OK}, reports={WEB.replica: {**RUNNING, "health": "unhealthy"}}),
        "degraded",
        "n1 prod.web.0: healthcheck unhealthy",
    ),
    (
        "healthcheck starting",
        dict(replicas=[WEB], nodes={"n1": OK}, reports={WEB.replica: {**RUNNING, "health": "starting"}}),
        "progressing",
        "n1 prod.web.0: healthcheck starting",
    ),
    (
        "converged, the replica's own report not heard: its node vouches for it",
        dict(replicas=[WEB], nodes={"n1": OK}, reports={}),
        "healthy",
        "",
    ),
    (
        "converged on a later spec: a crash loop of another digest is not this deployment's",
        dict(
            replicas=[WEB],
            nodes={"n1": OK},
            reports={WEB.replica: {**RUNNING, "digest": "sha256:later", "restart_count": 5}},
        ),
        "healthy",
        "",
    ),
    (
        "the node that should run it is not reporting",
        dict(replicas=[WEB], nodes={"n1": NodeSeen("offline", "no heartbeat for 45 s")}, reports={}),
        "unknown",
        "n1: not reporting (offline: no heartbeat for 45 s)",
    ),
    (
        "waiting for promotion",
        dict(
            replicas=[WEB],
            nodes={"n1": OK},
            reports={WEB.replica: RUNNING},
            rollouts=[{"service": "web", "state": "waiting-promotion", "reasons": []}],
        ),
        "suspended",
        "web: staged rollout waiting-promotion",
    ),
    (
        "a paused rollout failed",
        dict(
            replicas=[WEB],
            nodes={"n1": OK},
            reports={WEB.replica: RUNNING},
            rollouts=[
                {
                    "service": "web",
                    "state": "paused",
                    "reasons": [{"node": "n1", "replica": "prod.web.0", "reason": "healthcheck unhealthy"}],
                }
            ],
        ),
        "failed",
        "n1 prod.web.0: paused: healthcheck unhealthy",
    ),
    (
        "failed wins over degraded and unknown",
        dict(
            replicas=[WEB, Replica("prod.api.0", None)],
            nodes={
                "n1": NodeSeen(errors=("invalid mount config",)),
                "n2": NodeSeen("unknown", "never heard"),
            },
            reports={},
            unassigned={"prod.api.0": "no node"},
        ),
        "failed",
        "n1: invalid mount config",
    ),
    ("nothing wanted", dict(replicas=[], nodes={}, reports={}), "healthy", ""),
    (
        "running, not settled yet",
        dict(replicas=[WEB], nodes={"n1": OK}, reports={WEB.replica: RUNNING}, settled=()),
        "progressing",
        "n1 prod.web.0: running, not long enough yet to tell it is not crash-looping",
    ),
    (
        "the node's Docker daemon away: it retries, the deployment waits",
        dict(
            replicas=[WEB],
            nodes={"n1": NodeSeen(errors=("list containers: Docker unreachable: connection aborted",))},
            reports={WEB.replica: {"state": "exited", "error": "remove c1: Docker unreachable: refused"}},
            fresh={WEB.replica},
        ),
        "progressing",
        "n1: not converged yet: list containers: Docker unreachable: connection aborted",
    ),
    (
        "the node's disk full: it retries, the deployment waits",
        dict(
            replicas=[WEB],
            nodes={
                "n1": NodeSeen(errors=("prod.job.0: its record cannot be saved (No space left on device)",))
            },
            reports={},
        ),
        "progressing",
        "n1: not converged yet: prod.job.0: its record cannot be saved (No space left on device)",
    ),
    (
        "running and settled",
        dict(replicas=[WEB], nodes={"n1": OK}, reports={WEB.replica: RUNNING}, settled={WEB.replica}),
        "healthy",
        "",
    ),
]


@pytest.mark.parametrize(("case", "inputs", "state", "first"), CASES, ids=[c[0] for c in CASES])
def test_assess(case: str, inputs: dict[str, Any], state: str, first: str) -> None:
    health = assess(**inputs)
    assert health.state == state, (case, health)
    assert (health.reasons[0].text() if health.reasons else "") == first


def test_deploy_status_words() -> None:
    assert [Health(s).deploy_status for s in ("healthy", "degraded", "failed", "suspended", "unknown")] == [
        "success",
        "failed",
        "failed",
        "running",
        "running",
    ]
