"""Benchmark: the agent converging N containers from empty vs plain docker-py creating and
starting the same containers one by one, in the same run (run by ``make bench``).

Prints one JSON object (wall times, ratio, target 0.6), plus the daemon's own floor: raw
create+start calls with the same parallelism and no agent logic. Every container carries a
benchmark label and is removed at the end. It reports, it never gates: exit 0 whenever
the measurement ran, 2 when no Docker daemon answers.
Baseline (same run): plain docker-py creating and starting the same containers one by one.
Target: the agent in at most 0.6x the baseline's wall time.
"""

from __future__ import annotations

import json
import os
import sys
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from node_agent.docker_port import DockerPort  # noqa: E402
from node_agent.reconcile import NodeReconciler  # noqa: E402
from tests.support import agent_support as spec  # noqa: E402
from tests.support import docker as docker_support  # noqa: E402

COUNT = int(os.environ.get("BENCH_CONTAINERS", "30"))
PARALLELISM = int(os.environ.get("PHRAME_PARALLELISM", "4"))
TARGET_RATIO = 0.6


# what report.py puts in the table (benchmarks/figures.py says how to read it)
FIGURES = [
    {
        "name": "converge 30 containers from empty",
        "value": "agent_s",
        "unit": "s",
        "baseline": "baseline_sequential_s",
        "target": "target_ratio",
        "check": "ratio",
    },
    {
        "name": "the daemon's floor (raw parallel create+start)",
        "value": "parallel_floor_s",
        "unit": "s",
        "baseline": "baseline_sequential_s",
        "target": None,
    },
]


def specs(env: str, label: str, image: str) -> list[dict[str, Any]]:
    return [
        spec.container(
            env,
            f"s{i}",
            image=image,
            command=["sleep", "3600"],
            labels={docker_support.TEST_LABEL: label},
        )
        for i in range(COUNT)
    ]


def baseline(client: Any, items: list[dict[str, Any]], label: str) -> float:
    """What a user would write: docker-py, create then start, one container after another."""
    start = time.perf_counter()
    for s in items:
        c = client.containers.create(
            s["image"],
            s["command"],
            name=s["name"] + "-base",
            labels={docker_support.TEST_LABEL: label},
        )
        c.start()
    return time.perf_counter() - start


def parallel_floor(client: Any, items: list[dict[str, Any]], label: str) -> float:
    """Raw low-level create+start calls with the agent's parallelism and nothing else: what
    the daemon allows at best on this machine (it serialises much of ``start``)."""
    from concurrent.futures import ThreadPoolExecutor

    def one(s: dict[str, Any]) -> None:
        made = client.api.create_container(
            s["image"], s["command"], name=s["name"] + "-floor", labels={docker_support.TEST_LABEL: label}
        )
        client.api.start(made["Id"])

    start = time.perf_counter()
    with ThreadPoolExecutor(PARALLELISM) as pool:
        list(pool.map(one, items))
    return time.perf_counter() - start


def main() -> int:
    client = docker_support.try_docker_client()
    if client is None:
        print(json.dumps({"benchmark": "agent_converge", "error": "no Docker daemon"}))
        return 2
    label = f"bench-{uuid.uuid4().hex[:8]}"
    try:
        image = docker_support.busybox_image(client)
        tag = uuid.uuid4().hex[:6]
        items = specs(f"bench{tag}", label, image)
        base_s = baseline(client, items, label)
        docker_support.cleanup(client, label)  # each run starts from the same empty daemon
        floor_s = parallel_floor(client, items, label)
        docker_support.cleanup(client, label)
        port = DockerPort(f"bench-{tag}", client=client, stop_timeout=1)
        reconciler = NodeReconciler(f"bench-{tag}", port, parallelism=PARALLELISM)
        start, cpu = time.perf_counter(), time.process_time()
        result = reconciler.run_pass(spec.desired(items, with_manifest=True))
        agent_s = time.perf_counter() - start
        agent_cpu_s = time.process_time() - cpu
        running = len(client.containers.list(filters={"label": f"io.phrame.node=bench-{tag}"}, sparse=True))
        ratio = agent_s / base_s
        print(
            json.dumps(
                {
                    "benchmark": "agent_converge",
                    "containers": COUNT,
                    "parallelism": PARALLELISM,
                    "baseline_sequential_s": round(base_s, 3),
                    "agent_s": round(agent_s, 3),
                    "parallel_floor_s": round(floor_s, 3),
                    "floor_ratio": round(floor_s / base_s, 3),
                    "agent_over_floor": round(agent_s / floor_s, 3),
                    "agent_cpu_s": round(agent_cpu_s, 3),
                    "ratio": round(ratio, 3),
                    "target_ratio": TARGET_RATIO,
                    "meets_target": ratio <= TARGET_RATIO,
                    "agent_converged": result.converged,
                    "agent_running": running,
                    "docker_calls": dict(port.calls),
                },
                indent=2,
            )
        )
    finally:
        docker_support.cleanup(client, label)
        client.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
