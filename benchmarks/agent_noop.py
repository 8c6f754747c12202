"""Benchmark: a no-op resync of the agent with N (200) managed containers running
(run by ``make bench``; prints one JSON object).

Measures, per pass (observe + plan + execute nothing + report nothing new): Docker API
calls, CPU time and wall time, and the process RSS afterwards. Targets: at most 2 list
calls, under 50 ms CPU per pass, RSS under 80 MB. Containers carry a benchmark label and
are removed at the end. Reports, never gates: exit 0 when it ran, 2 without Docker.
Baseline: none measured (the targets are absolute budgets of a pass that should do nothing).
Targets: at most 2 Docker list calls, under 50 ms CPU per pass, RSS under 80 MB.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import psutil

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from node_agent.docker_port import DockerPort  # noqa: E402
from node_agent.reconcile import NodeReconciler  # noqa: E402
from node_agent.reporting import ActualReporter  # noqa: E402
from schemas import Topics  # noqa: E402
from tests.support import agent_support as spec  # noqa: E402
from tests.support import docker as docker_support  # noqa: E402

COUNT = int(os.environ.get("BENCH_CONTAINERS", "200"))
PASSES = 20
TARGET_CALLS, TARGET_CPU_MS, TARGET_RSS_MB = 2, 50.0, 80.0


# what report.py puts in the table (benchmarks/figures.py says how to read it)
FIGURES = [
    {
        "name": "Docker calls per no-op pass (max)",
        "value": "docker_calls_per_pass_max",
        "unit": "calls",
        "baseline": None,
        "target": "targets.calls",
    },
    {
        "name": "CPU per no-op pass (median)",
        "value": "cpu_ms_per_pass_median",
        "unit": "ms",
        "baseline": None,
        "target": "targets.cpu_ms",
        "op": "<",
    },
    {
        "name": "agent RSS with 200 containers",
        "value": "rss_mb",
        "unit": "MB",
        "baseline": None,
        "target": "targets.rss_mb",
        "op": "<",
    },
]


class CountingPublisher:
    def __init__(self) -> None:
        self.count = 0

    def publish(self, topic: str, payload: bytes | None, retain: bool = True, qos: int = 1) -> None:
        self.count += 1


def main() -> int:
    client = docker_support.try_docker_client()
    if client is None:
        print(json.dumps({"benchmark": "agent_noop", "error": "no Docker daemon"}))
        return 2
    label = f"bench-{uuid.uuid4().hex[:8]}"
    tag = uuid.uuid4().hex[:6]
    node = f"bench-{tag}"
    try:
        image = docker_support.busybox_image(client)
        items = [
            spec.container(
                f"bench{tag}",
                f"s{i}",
                image=image,
                command=["sleep", "3600"],
                labels={docker_support.TEST_LABEL: label},
            )
            for i in range(COUNT)
        ]
        desired = spec.desired(items, with_manifest=True)
        port = DockerPort(node, client=client, stop_timeout=1)
        setup = NodeReconciler(node, port, parallelism=16).run_pass(desired)  # not measured
        reconciler = NodeReconciler(node, port, parallelism=4)
        publisher = CountingPublisher()
        reporter = ActualReporter(publisher, Topics(), node, inspect=port.inspect_container)
        reporter.report_items(desired, reconciler.observe(), {})  # first report: all new
        first_report = publisher.count
        publisher.count = 0
        calls, cpu_ms, wall_ms, actions = [], [], [], 0
        for _ in range(PASSES):
            before = sum(port.calls.values())
            cpu, wall = time.process_time(), time.perf_counter()
            result = reconciler.run_pass(desired)
            reporter.report_items(desired, result.actual, {})
            reporter.report_status("online", converged=result.converged)
            cpu_ms.append((time.process_time() - cpu) * 1000)
            wall_ms.append((time.perf_counter() - wall) * 1000)
            calls.append(sum(port.calls.values()) - before)
            actions += len(result.plan.actions)
        rss_mb = psutil.Process().memory_info().rss / 2**20
        out: dict[str, Any] = {
            "benchmark": "agent_noop",
            "containers": COUNT,
            "setup_converged": setup.converged,
            "passes": PASSES,
            "actions_in_noop_passes": actions,
            "docker_calls_per_pass_max": max(calls),
            "cpu_ms_per_pass_median": round(statistics.median(cpu_ms), 2),
            "cpu_ms_per_pass_max": round(max(cpu_ms), 2),
            "wall_ms_per_pass_median": round(statistics.median(wall_ms), 2),
            "publishes_first_report": first_report,
            "publishes_in_noop_passes": publisher.count - 1,  # the status once
            "rss_mb": round(rss_mb, 1),
            "targets": {"calls": TARGET_CALLS, "cpu_ms": TARGET_CPU_MS, "rss_mb": TARGET_RSS_MB},
            "meets_targets": max(calls) <= TARGET_CALLS
            and statistics.median(cpu_ms) < TARGET_CPU_MS
            and rss_mb < TARGET_RSS_MB,
        }
        print(json.dumps(out, indent=2))
    finally:
        docker_support.cleanup(client, label)
        client.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
