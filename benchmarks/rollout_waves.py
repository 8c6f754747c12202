"""Benchmark: what a staged rollout adds per wave, through the whole dev stack (``phrame dev``).

A service of 4 replicas with a healthcheck (every 1 s) and ``update: {max_parallel: 1,
min_healthy_s: 2}``; a push changes it, and config-sync's retained rollout state says when
each wave was released. A wave's time is the gap between two releases. Baseline (same run):
Docker's own time for one replica, the bare docker-py stop + remove of the old container,
create + start of the new one and its first ``healthy`` health check. Per wave, the overhead
is the gap minus ``min_healthy_s`` minus that baseline (median of the runs): the agent's pass,
the actual-plane report and config-sync's decision. Target: at most 1 s per wave.
Prints one JSON object; removes what it created (``phrame dev --down --purge``, the bare
containers by label). Exit 0 whenever it measured, 2 without Docker or mosquitto.
"""

from __future__ import annotations

import itertools
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.support import docker as docker_support  # noqa: E402
from tests.support.dev_stack import DevStackProcess  # noqa: E402

ROLLOUTS = max(1, int(os.environ.get("BENCH_ROLLOUTS", "2")))
MIN_HEALTHY_S = 2
TARGET_OVERHEAD_S = 1.0
LABEL = f"bench-rollout-{uuid.uuid4().hex[:8]}"
IMAGE = "phrame-quickstart/busybox:1"
LOOP = "trap 'exit 0' TERM; while true; do sleep 3600 & wait; done"

FIGURES = [
    {
        "name": "staged rollout: time per wave (4 replicas, max_parallel 1, min_healthy_s 2; median)",
        "value": "wave_s.median",
        "unit": "s",
        "baseline": "docker_replace_healthy_s.median",
        "target": None,
    },
    {
        "name": "staged rollout overhead per wave (minus min_healthy_s and Docker's replace → healthy)",
        "value": "overhead_per_wave_s.median",
        "unit": "s",
        "baseline": None,
        "target": "target_overhead_s",
        "op": "<=",
    },
]


def spec(round_: int) -> str:
    return (
        f'name: roll\nimage: {IMAGE}\ncommand: [sh, -c, "{LOOP}"]\nreplicas: 4\n'
        f"env:\n  ROUND: '{round_}'\nplacement:\n  labels:\n    pool: dev\n"
        "healthcheck:\n  test: 'exit 0'\n  interval: 1s\n  timeout: 1s\n  retries: 1\n"
        f"update:\n  max_parallel: 1\n  min_healthy_s: {MIN_HEALTHY_S}\n  healthy_deadline_s: 60\n"
    )


def wait_healthy(client: Any, cid: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        health = (client.api.inspect_container(cid)["State"].get("Health") or {}).get("Status")
        if health == "healthy":
            return
        time.sleep(0.02)
    raise TimeoutError(f"container {cid[:12]} not healthy within {timeout} s")


def bare_replace(client: Any) -> float:
    """Stop and remove a healthy container, create and start its successor, until healthy."""
    healthcheck = {
        "test": ["CMD-SHELL", "exit 0"],
        "interval": 1_000_000_000,
        "timeout": 1_000_000_000,
        "retries": 1,
    }

    def make() -> Any:
        c = client.containers.create(
            IMAGE,
            command=["sh", "-c", LOOP],
            healthcheck=healthcheck,
            labels=docker_support.labels(LABEL),
            name=f"{LABEL}-{uuid.uuid4().hex[:6]}",
        )
        c.start()
        return c

    old = make()
    wait_healthy(client, old.id)
    start = time.monotonic()
    old.stop(timeout=2)
    old.remove()
    new = make()
    wait_healthy(client, new.id)
    took = time.monotonic() - start
    new.remove(force=True)
    return took


def rollout_doc(stack: DevStackProcess) -> dict[str, Any]:
    return dict(stack.sync_status().get("rollouts", {}).get(f"{stack.environment}/roll") or {})


def one_rollout(stack: DevStackProcess, round_: int) -> list[float]:
    """Push ``round_``; the gaps between consecutive wave releases, seconds."""
    stack.env_file("services/roll.yaml").write_text(spec(round_))
    sha, _at = stack.commit_and_push(f"bench: rollout round {round_}")
    stack.wait(
        lambda: rollout_doc(stack).get("commit") == sha and rollout_doc(stack).get("state") == "complete",
        f"the rollout of round {round_} to complete",
        120,
    )
    released = sorted(r["released_at"] for r in rollout_doc(stack)["replicas"])
    return [b - a for a, b in itertools.pairwise(released)]


def main() -> int:
    client = docker_support.try_docker_client()
    if client is None or not (shutil.which("mosquitto") or Path("/usr/sbin/mosquitto").exists()):
        print(json.dumps({"benchmark": "rollout_waves", "error": "no Docker daemon or mosquitto"}))
        return 2
    root = Path(tempfile.mkdtemp(prefix="phrame-bench-rollout-"))
    stack = DevStackProcess(root)
    waves: list[float] = []
    bare: list[float] = []
    try:
        stack.wait_ready()
        stack.wait(lambda: all(stack.is_converged(n) for n in stack.nodes), "the sample converged", 120)
        stack.env_file("services/roll.yaml").write_text(spec(0))
        stack.commit_and_push("bench: roll")

        def healthy() -> bool:
            found = client.containers.list(filters={"label": "io.phrame.service=roll"})
            mine = [c for c in found if c.labels.get("io.phrame.node") in stack.nodes]
            return len(mine) == 4 and all(
                (c.attrs["State"].get("Health") or {}).get("Status") == "healthy" for c in mine
            )

        stack.wait(healthy, "4 healthy replicas", 120)
        for i in range(1, ROLLOUTS + 1):
            waves += one_rollout(stack, i)
            bare += [bare_replace(client) for _ in range(2)]
    finally:
        stack.close()
        docker_support.cleanup(client, LABEL)
        client.close()
        shutil.rmtree(root, ignore_errors=True)
    median_wave, median_bare = statistics.median(waves), statistics.median(bare)
    overheads = [w - MIN_HEALTHY_S - median_bare for w in waves]
    result = {
        "benchmark": "rollout_waves",
        "rollouts": ROLLOUTS,
        "min_healthy_s": MIN_HEALTHY_S,
        "wave_s": {"median": round(median_wave, 3), "all": [round(w, 3) for w in waves]},
        "docker_replace_healthy_s": {"median": round(median_bare, 3), "all": [round(b, 3) for b in bare]},
        "overhead_per_wave_s": {
            "median": round(statistics.median(overheads), 3),
            "max": round(max(overheads), 3),
        },
        "target_overhead_s": TARGET_OVERHEAD_S,
    }
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
