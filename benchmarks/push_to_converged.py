"""Benchmark: ``git push`` of a one-container change → the node reports it converged, through
the whole dev stack (``phrame dev``: local git host hook, config-sync, mosquitto, the agent),
against a bare docker-py ``create`` + ``start`` of the same container (image, command,
environment, published port, Docker networks) in the same run.

Prints one JSON object: medians over BENCH_PUSHES pushes (default 7, at least 5), the
pipeline overhead (total minus bare Docker; target at most 0.3 s, against both baselines
below), and the time from starting ``phrame dev`` to its ready banner, first start (new
state) and second start (state reused).
Everything it creates is removed (``phrame dev --down --purge``, the bare containers by
label). Exit 0 whenever it measured, 2 without Docker or mosquitto.
Baseline (same run): the bare docker-py ``create`` + ``start``, on the container's own
networks and, beside it, on Docker's default bridge. Target: pipeline overhead (push →
converged minus the baseline) at most 0.3 s against either.
"""

from __future__ import annotations

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
from tests.support.services import free_port  # noqa: E402

PUSHES = max(5, int(os.environ.get("BENCH_PUSHES", "7")))
TARGET_OVERHEAD_S = 0.3
LABEL = f"bench-push-{uuid.uuid4().hex[:8]}"


# what report.py puts in the table (benchmarks/figures.py says how to read it)
FIGURES = [
    {
        "name": "`git push` → node converged (median; bare docker-py create+start as baseline)",
        "value": "push_to_converged_s.median",
        "unit": "s",
        "baseline": "bare_create_start_s.median",
        "target": None,
    },
    {
        "name": "pipeline overhead (push → converged minus bare create+start)",
        "value": "overhead_s",
        "unit": "s",
        "baseline": None,
        "target": "target_overhead_s",
    },
    {
        "name": "pipeline overhead against a bare create+start on the default bridge",
        "value": "overhead_vs_default_bridge_s",
        "unit": "s",
        "baseline": None,
        "target": "target_overhead_s",
    },
    {
        "name": "`phrame dev` start → ready (new state)",
        "value": "ready_first_start_s",
        "unit": "s",
        "baseline": None,
        "target": None,
    },
]


def bare_create_start(client: Any, spec: dict[str, Any], *, networks: bool = True) -> tuple[float, float]:
    """(create + start, stop + remove) of the web container as docker-py does it, seconds:
    the same image, command, environment and published port, on the same Docker networks
    (joining a user network is part of Docker's start: 50-70 ms here); without ``networks``,
    on Docker's default bridge (the baseline before 2026-12-06, reported beside it)."""
    port = free_port()
    joined = spec["networks"] if networks else []
    start = time.monotonic()
    c = client.containers.create(
        spec["image"],
        command=spec["command"],
        environment={**spec["env"], "PHRAME_COMMIT": spec["commit"]},
        ports={"8080/tcp": ("127.0.0.1", port)},
        labels=docker_support.labels(LABEL),
        name=f"{LABEL}-{uuid.uuid4().hex[:6]}",
        network=joined[0] if joined else None,
    )
    for net in joined[1:]:
        client.networks.get(net).connect(c)
    c.start()
    created = time.monotonic() - start
    start = time.monotonic()
    c.stop(timeout=10)
    c.remove()
    return created, time.monotonic() - start


def push_page(stack: DevStackProcess, text: str) -> float:
    web = stack.env_file("services/web.yaml")
    lines = [
        f"  PAGE_TEXT: {text}" if ln.startswith("  PAGE_TEXT:") else ln for ln in web.read_text().splitlines()
    ]
    web.write_text("\n".join(lines) + "\n")
    sha, at = stack.commit_and_push(f"bench: {text}")
    node = stack.nodes[0]
    stack.wait(lambda: stack.is_converged(node, sha), f"{node} converged on {sha[:12]}", 60)
    took = time.monotonic() - at
    stack.wait(lambda: text in stack.page(), "the new page", 10)
    return took


def start_stack(root: Path) -> tuple[DevStackProcess, float]:
    stack = DevStackProcess(root)
    ready = stack.wait_ready()
    stack.wait(lambda: all(stack.is_converged(n) for n in stack.nodes), "the sample converged", 120)
    return stack, ready


def main() -> int:
    client = docker_support.try_docker_client()
    if client is None or not (shutil.which("mosquitto") or Path("/usr/sbin/mosquitto").exists()):
        print(json.dumps({"benchmark": "push_to_converged", "error": "no Docker daemon or mosquitto"}))
        return 2
    root = Path(tempfile.mkdtemp(prefix="phrame-bench-push-"))
    stack, ready_first = start_stack(root)
    totals: list[float] = []
    bare: list[float] = []
    bridge: list[float] = []  # the same container on the default bridge
    teardown: list[float] = []
    try:
        web = next(
            c
            for c in client.containers.list(filters={"label": f"io.phrame.node={stack.nodes[0]}"})
            if c.labels.get("io.phrame.service") == "web"
        )
        spec = {
            "image": web.attrs["Config"]["Image"],
            "command": web.attrs["Config"]["Cmd"],
            "env": dict(e.split("=", 1) for e in web.attrs["Config"]["Env"]),
            "commit": web.labels["io.phrame.commit"],
            # the environment's networks the agent made (the stack's: left to it)
            "networks": sorted(web.attrs["NetworkSettings"]["Networks"]),
        }
        push_page(stack, "warm-up")  # the first recreate pays for cold caches
        for i in range(PUSHES):
            totals.append(push_page(stack, f"bench {i}"))
            created, removed = bare_create_start(client, spec)
            bare.append(created)
            teardown.append(removed)
            bridge.append(bare_create_start(client, spec, networks=False)[0])
        # second start on the same state (a warm machine): stop the processes, start again
        stack.stop()
        stack.start()
        ready_second = stack.wait_ready()
    finally:
        stack.close()
        docker_support.cleanup(client, LABEL)
        client.close()
        shutil.rmtree(root, ignore_errors=True)
    median_total, median_bare = statistics.median(totals), statistics.median(bare)
    result = {
        "benchmark": "push_to_converged",
        "pushes": PUSHES,
        "push_to_converged_s": {"median": round(median_total, 3), "all": [round(t, 3) for t in totals]},
        "bare_create_start_s": {"median": round(median_bare, 3), "all": [round(t, 3) for t in bare]},
        "bare_stop_remove_s": {"median": round(statistics.median(teardown), 3)},
        "overhead_s": round(median_total - median_bare, 3),
        "overhead_vs_full_recreate_s": round(median_total - median_bare - statistics.median(teardown), 3),
        "bare_create_start_default_bridge_s": {"median": round(statistics.median(bridge), 3)},
        "overhead_vs_default_bridge_s": round(median_total - statistics.median(bridge), 3),
        "target_overhead_s": TARGET_OVERHEAD_S,
        "ready_first_start_s": round(ready_first, 2),
        "ready_second_start_s": round(ready_second, 2),
    }
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
