"""The fleet benchmark's simulation at 20 nodes, so its code cannot rot unnoticed.

Real mosquitto, a real bare repository with the dev stack's post-receive hook, real
``phrame config-sync`` and ``phrame placement`` processes, and 20 simulated nodes in two
worker processes: real node agents over ``benchmarks/sim_docker.py``
(``benchmarks/fleet_sim.py``), and the light asyncio nodes ``fleet_scale.py`` uses past
1,000 nodes (``benchmarks/fleet_lite.py``), each asserted the same way. It asserts
convergence and placement's move, never timing (that is ``fleet_scale.py``'s job).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

from fleet_harness import Fleet, wait  # noqa: E402
from fleet_repo import ENV, FLEET_SERVICE, core_nodes, fleet_files, fleet_service, node_names  # noqa: E402
from repo_gen import dump  # noqa: E402

NODES = 20


@pytest.fixture(params=["real", "lite"])
def fleet(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Fleet]:
    f = Fleet(tmp_path, fleet_files(NODES), node_names(NODES), workers=2, agents=request.param)
    try:
        f.start_broker()
        yield f
    finally:
        f.close()


def converged_on(fleet: Fleet, sha: str) -> bool:
    if fleet.observer.target != sha:
        fleet.observer.aim(sha)
    return len(fleet.observer.converged_at) == NODES


def assignments(fleet: Fleet, sha: str) -> dict[str, list[str | None]]:
    doc: dict[str, list[str | None]] = json.loads(fleet.file_at(sha, f"environments/{ENV}/node.json"))[
        "assignments"
    ]
    return doc


@pytest.mark.slow
def test_twenty_simulated_nodes_converge_and_a_lost_one_loses_only_its_replicas(fleet: Fleet) -> None:
    fleet.start_config_sync()
    fleet.start_nodes()
    first = fleet.head()
    wait(lambda: converged_on(fleet, first), "20 nodes converged on the first commit", 60)
    fleet.start_placement({"PHRAME_RESCHEDULE_AFTER_S": "1", "PHRAME_PLACEMENT_INTERVAL_S": "1"})
    state_topic = f"phrame/desired/environments/{ENV}/placement"
    wait(lambda: fleet.observer.doc(state_topic), "placement's first state", 60)

    path = f"environments/{ENV}/services/{FLEET_SERVICE}.yaml"
    fleet.observer.start_recording()
    sha, _ = fleet.commit_and_push({path: dump(path, fleet_service(NODES, "2.0"))}, "edge-agent 2.0")
    wait(lambda: converged_on(fleet, sha), "20 nodes converged on the new commit", 60)
    statuses = [m for m in fleet.observer.stop_recording() if m[1].endswith("/status")]
    # one status per node for the change: none reports the new item before its manifest
    assert len(statuses) == NODES, sorted(m[1] for m in statuses)
    for i, node in enumerate(node_names(NODES)):
        item = fleet.observer.doc(f"phrame/actual/nodes/{node}/containers/{ENV}.{FLEET_SERVICE}.{i}")
        assert item["state"] == "running" and item["image"].endswith(":2.0"), (node, item)
    deploys = f"phrame/desired/environments/{ENV}/deploys"
    wait(
        lambda: any(
            r["commit"] == sha and r["state"] == "converged"
            for r in (fleet.observer.doc(deploys) or {}).get("deploys", [])
        ),
        "the deploy record converged",
        30,
    )

    lost = core_nodes(NODES)[1]
    old = assignments(fleet, fleet.head())
    fleet.stop_node(lost)
    wait(
        lambda: lost not in json.dumps(assignments(fleet, fleet.head())),
        "placement's commit moving the lost node's replicas",
        60,
    )
    new = assignments(fleet, fleet.head())
    changed = [(s, i) for s in old for i, n in enumerate(old[s]) if new[s][i] != n]
    on_lost = [(s, i) for s in old for i, n in enumerate(old[s]) if n == lost]
    assert changed == on_lost and on_lost, (changed, on_lost)


@pytest.mark.slow
def test_a_killed_worker_s_nodes_go_by_their_last_wills_and_lose_only_their_replicas(fleet: Fleet) -> None:
    fleet.start_config_sync()
    fleet.start_nodes()
    wait(lambda: converged_on(fleet, fleet.head()), "20 nodes converged", 60)
    fleet.start_placement({"PHRAME_RESCHEDULE_AFTER_S": "1", "PHRAME_PLACEMENT_INTERVAL_S": "1"})
    wait(
        lambda: fleet.observer.doc(f"phrame/desired/environments/{ENV}/placement"),
        "placement's first state",
        60,
    )
    old = assignments(fleet, fleet.head())
    lost = set(fleet.kill_worker("nodes-1"))  # SIGKILL: no agent says goodbye
    assert len(lost) == NODES // 2
    wait(lambda: not lost & {n for row in assignments(fleet, fleet.head()).values() for n in row if n},
         "placement's commit without the killed nodes", 60)  # fmt: skip
    wills = {n: fleet.observer.statuses.get(n) for n in lost}
    assert all(
        doc == {"state": "offline", "agent": "node-agent", "reason": "lost"} for doc in wills.values()
    ), wills
    new = assignments(fleet, fleet.head())
    changed = [(s, i) for s in old for i, n in enumerate(old[s]) if new[s][i] != n]
    on_lost = [(s, i) for s in old for i, n in enumerate(old[s]) if n in lost]
    assert changed == on_lost and on_lost, (changed, on_lost)
