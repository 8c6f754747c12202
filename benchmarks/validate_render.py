"""Benchmark: validate + render of a generated 50-node, 2,000-service repository against a
bare libyaml compose (PyYAML's C ``CSafeLoader``) of the same files, measured in the same run
(run by ``make bench``; prints one JSON object). ruamel's round-trip load of them is reported
beside it, as the baseline of earlier figures.

Each measurement runs in a fresh subprocess so caches and memory do not carry over; the
child times only the work (not interpreter start or imports) and reports its own peak RSS.
It reports targets, it never gates: the exit status is 0 whenever the measurement ran.
"""

from __future__ import annotations

import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
NODES, SERVICES, SEED = 50, 2000, 2026
REPETITIONS = 5
TARGET_RATIO, TARGET_RSS_MB = 8.0, 150


# what report.py puts in the table (benchmarks/figures.py says how to read it)
FIGURES = [
    {
        "name": "load + validate + render, 50 nodes / 2,000 services (bare libyaml compose as baseline)",
        "value": "validate_render_s",
        "unit": "s",
        "baseline": "baseline_libyaml_compose_s",
        "target": "target_ratio",
        "check": "ratio",
    },
    {
        "name": "peak RSS",
        "value": "peak_rss_mb",
        "unit": "MB",
        "baseline": "baseline_peak_rss_mb",
        "target": "target_rss_mb",
    },
]


def _yaml_files(repo: str) -> list[Path]:
    return [
        Path(dirpath, name)
        for dirpath, _dirs, files in os.walk(repo)
        for name in sorted(files)
        if name.endswith((".yaml", ".yml"))
    ]


def baseline(repo: str) -> dict[str, Any]:
    """The floor: libyaml's C composer over every YAML file (nodes with line and column,
    no values built, nothing checked). Reading the bytes is timed too, as for validate."""
    import yaml

    start = time.perf_counter()
    paths = _yaml_files(repo)
    for path in paths:
        yaml.compose(path.read_bytes(), Loader=yaml.CSafeLoader)
    return {"seconds": time.perf_counter() - start, "files": len(paths)}


def ruamel_load(repo: str) -> dict[str, Any]:
    """What the earlier figures of docs/performance.md compared with: ruamel's round-trip loader."""
    from ruamel.yaml import YAML

    yaml = YAML()
    start = time.perf_counter()
    paths = _yaml_files(repo)
    for path in paths:
        yaml.load(path.read_bytes())
    return {"seconds": time.perf_counter() - start, "files": len(paths)}


def validate_render(repo: str) -> dict[str, Any]:
    from phrame.config_repo import load_directory, render, validate

    start = time.perf_counter()
    loaded, read_problems = load_directory(repo)
    problems = validate(loaded, read_problems)
    topics = render(loaded).topics()
    seconds = time.perf_counter() - start
    return {"seconds": seconds, "problems": len(problems), "topics": len(topics)}


CHILDREN = {"baseline": baseline, "validate_render": validate_render, "ruamel_load": ruamel_load}


def run_child(mode: str, repo: str) -> dict[str, Any]:
    paths = [str(ROOT), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(paths)}
    out = subprocess.run(
        [sys.executable, __file__, "--child", mode, repo],
        check=True,
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        timeout=120,
    )
    result: dict[str, Any] = json.loads(out.stdout)
    return result


def main() -> int:
    sys.path.insert(0, str(HERE))
    from repo_gen import write_repo

    with tempfile.TemporaryDirectory(prefix="phrame-bench-") as repo:
        write_repo(repo, nodes=NODES, services=SERVICES, seed=SEED)
        files = sum(len(f) for _, _, f in os.walk(repo))
        runs: dict[str, list[dict[str, Any]]] = {"baseline": [], "validate_render": []}
        for _ in range(REPETITIONS):  # interleaved, so a slow spell of the machine hits both
            for mode in runs:
                runs[mode].append(run_child(mode, repo))
        ruamel_s = run_child("ruamel_load", repo)["seconds"]  # once: it is slow, and only context
    base_s = statistics.median(r["seconds"] for r in runs["baseline"])
    vr_s = statistics.median(r["seconds"] for r in runs["validate_render"])
    ratio = vr_s / base_s
    rss_mb = max(r["maxrss_kb"] for r in runs["validate_render"]) / 1024
    problems = max(r["problems"] for r in runs["validate_render"])
    report = {
        "benchmark": "validate_render",
        "nodes": NODES,
        "services": SERVICES,
        "files": files,
        "baseline": "bare libyaml compose (yaml.compose, CSafeLoader) of the same files",
        "baseline_libyaml_compose_s": round(base_s, 3),
        "validate_render_s": round(vr_s, 3),
        "ratio": round(ratio, 2),
        "target_ratio": TARGET_RATIO,
        "peak_rss_mb": round(rss_mb, 1),
        "target_rss_mb": TARGET_RSS_MB,
        "meets_targets": ratio <= TARGET_RATIO and rss_mb <= TARGET_RSS_MB and problems == 0,
        "repetitions": REPETITIONS,
        "yaml_files": runs["baseline"][0]["files"],
        "topics": runs["validate_render"][0]["topics"],
        "problems": problems,
        "ruamel_roundtrip_load_s": round(ruamel_s, 3),
        "ratio_to_ruamel_load": round(vr_s / ruamel_s, 3),
        "baseline_peak_rss_mb": round(max(r["maxrss_kb"] for r in runs["baseline"]) / 1024, 1),
    }
    print(json.dumps(report))
    return 0


def child(mode: str, repo: str) -> int:
    result = CHILDREN[mode](repo)
    # ru_maxrss is in KiB on Linux: the peak of this process alone, interpreter included
    result["maxrss_kb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "--child":
        sys.exit(child(sys.argv[2], sys.argv[3]))
    sys.exit(main())
