"""Benchmark: placement's interval pass on the fleet repository at 10,000 nodes, every node alive.

``PlacementReconciler.run_pass`` as ``phrame placement`` runs it every
``PHRAME_PLACEMENT_INTERVAL_S`` (fetch, read, judge every node, decide) on a bare git clone of
``benchmarks/fleet_repo.py``'s repository (``BENCH_PASS_NODES`` nodes, 10,000 by default:
``edge-agent`` on every node, 20 core services on the core nodes), with every node's
heartbeat in its actual view. Measured: the pass on an unchanged head with unchanged health
(it decides nothing: its inputs are those of the last decision) against the same pass made to
decide again, as every interval pass did before (the baseline, interleaved in the same run),
and the pass after one node's health changed (it decides). Its share of one core at the
default 10 s interval follows. No broker, no agents: ``fleet_scale`` runs those. Target:
an unchanged pass at most a quarter of the deciding one. Prints one JSON object; exit 0.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "benchmarks")]

from fleet_repo import fleet_files, node_names, write_files  # noqa: E402

from phrame.actual import ActualView  # noqa: E402
from placement.git_repo import PlacementRepo  # noqa: E402
from placement.health import PlacementHealth  # noqa: E402
from placement.reconcile import PlacementReconciler  # noqa: E402
from schemas import Topics  # noqa: E402

NODES = int(os.environ.get("BENCH_PASS_NODES", "10000"))
RUNS, INTERVAL_S, TARGET_RATIO = 5, 10.0, 0.25

FIGURES = [
    {
        "name": "placement pass at 10,000 nodes, inputs unchanged (a pass deciding again as baseline)",
        "value": "unchanged_pass_s_median",
        "unit": "s",
        "baseline": "deciding_pass_s_median",
        "target": "target_ratio",
        "check": "ratio",
        "op": "<=",
    },
]


def git(*args: str, cwd: Path) -> None:
    env = {**os.environ, "GIT_AUTHOR_NAME": "b", "GIT_AUTHOR_EMAIL": "b@x.invalid",
           "GIT_COMMITTER_NAME": "b", "GIT_COMMITTER_EMAIL": "b@x.invalid"}  # fmt: skip
    subprocess.run(["git", *args], cwd=cwd, env=env, check=True, capture_output=True)


def main() -> int:
    root = Path(tempfile.mkdtemp(prefix="phrame-bench-pass-"))
    try:
        bare, work = root / "config.git", root / "work"
        git("init", "-q", "--bare", "-b", "main", str(bare), cwd=root)
        work.mkdir()
        git("init", "-q", "-b", "main", cwd=work)
        write_files(work, fleet_files(NODES))
        git("add", "-A", cwd=work)
        git("commit", "-q", "-m", "fleet", cwd=work)
        git("push", "-q", str(bare), "main", cwd=work)
        now = time.time()
        view = ActualView(Topics(), timeout_s=20, started_at=now, clock=lambda: now)
        for node in node_names(NODES):
            view.heartbeat(node, {"ts": now, "interval_s": 5}, retained=False, received_at=now)
        rec = PlacementReconciler(PlacementRepo(str(bare), root / "clone.git"), PlacementHealth(view),
                                  clock=lambda: now, reschedule_after_s=60, node_gc_s=86400)  # fmt: skip
        t0 = time.perf_counter()
        first = rec.run_pass()
        cold = time.perf_counter() - t0
        rec.run_pass()  # its own commit, if the first pass made one: read once
        unchanged, deciding = [], []
        for _ in range(RUNS):
            t0 = time.perf_counter()
            rec.run_pass()
            unchanged.append(time.perf_counter() - t0)
            rec._decided.clear()  # the baseline: the same pass deciding again
            t0 = time.perf_counter()
            rec.run_pass()
            deciding.append(time.perf_counter() - t0)
        u, d = statistics.median(unchanged), statistics.median(deciding)
        print(json.dumps({
            "benchmark": "placement_pass",
            "nodes": NODES,
            "first_pass_s": round(cold, 3),
            "first_pass_committed": bool(first and first[0].commit),
            "unchanged_pass_s_median": round(u, 3),
            "deciding_pass_s_median": round(d, 3),
            "unchanged_passes_s": [round(x, 3) for x in unchanged],
            "deciding_passes_s": [round(x, 3) for x in deciding],
            "ratio": round(u / d, 3),
            "core_share_at_interval": {"unchanged": round(u / INTERVAL_S, 4),
                                       "deciding": round(d / INTERVAL_S, 4)},
            "decisions": rec.decisions,
            "decisions_skipped": rec.decisions_skipped,
            "load1": os.getloadavg()[0],
            "target_ratio": TARGET_RATIO,
        }, indent=2))  # fmt: skip
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
