"""Benchmark: ``phrame validate`` (load + validate) of large legal-looking repositories against
ordinary repositories of the same size, measured in the same run (``make bench``; prints one
JSON object).

Hostile cases: one service file of 1 MB holding a 250,000-item list;
100,000 aliases of one anchor; a 3,001-service ``depends_on`` chain (validate, then render);
a 12 KB file whose aliases render to a 1.1 MB container. Baselines: 1 MB of ordinary service
files, and 3,001 ordinary services (validate, then render). Each measurement runs in a fresh
subprocess and times only the work. It reports, it never gates: exit 0 whenever it ran.
Targets: each hostile case at most the time of its ordinary baseline of the same size
(1x); the chain with render at most 1.5x 3,001 ordinary services.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
REPETITIONS = 3
HEAD = "name: {name}\nimage: registry.example/app:1\nplacement:\n  node: n1\n"


# what report.py puts in the table (benchmarks/figures.py says how to read it)
FIGURES = [
    {
        "name": "1 MB file of 250,000 list items (1 MB of ordinary files as baseline)",
        "value": "cases.list_250k_items.seconds",
        "unit": "s",
        "baseline": "cases.ordinary_1mb.seconds",
        "target": 1,
        "check": "ratio",
    },
    {
        "name": "100,000 aliases (1 MB of ordinary files as baseline)",
        "value": "cases.aliases_100k.seconds",
        "unit": "s",
        "baseline": "cases.ordinary_1mb.seconds",
        "target": 1,
        "check": "ratio",
    },
    {
        "name": "12 KB rendering to 1.1 MB (1 MB of ordinary files as baseline)",
        "value": "cases.payload_1_1_mb.seconds",
        "unit": "s",
        "baseline": "cases.ordinary_1mb.seconds",
        "target": 1,
        "check": "ratio",
    },
    {
        "name": "3,001-service `depends_on` chain (3,001 ordinary services as baseline)",
        "value": "cases.depends_on_chain_3001.seconds",
        "unit": "s",
        "baseline": "cases.ordinary_3001.seconds",
        "target": 1.5,
        "check": "ratio",
    },
]


def _service(root: Path, name: str, body: str = "") -> None:
    path = root / "environments" / "lab" / "services" / f"{name}.yaml"
    path.write_text(HEAD.format(name=name) + body)


def _ordinary(i: int) -> str:
    env = "".join(f"  VAR_{k}: value-{i}-{k}\n" for k in range(8))
    return f'env:\n{env}ports:\n  - "127.0.0.1:{10000 + i}:80"\nlabels:\n  team: t{i % 7}\n'


def write_case(case: str, root: Path) -> None:
    (root / "nodes").mkdir(parents=True)
    (root / "nodes" / "n1.yaml").write_text("name: n1\n")
    (root / "environments" / "lab" / "services").mkdir(parents=True)
    (root / "environments" / "lab" / "environment.yaml").write_text("name: lab\n")
    if case == "list_250k_items":
        _service(root, "web", "command:\n" + "- a\n" * 250_000)
    elif case == "aliases_100k":
        _service(root, "web", "labels:\n  a: &a v\ncommand: [" + ", ".join(["*a"] * 100_000) + "]\n")
    elif case == "payload_1_1_mb":
        env = "".join(f"  A{i}: *big\n" for i in range(1, 100))
        _service(root, "web", f"env:\n  A0: &big {'x' * 11_000}\n{env}")
    elif case == "depends_on_chain_3001":
        _service(root, "s0")
        for i in range(1, 3001):
            _service(root, f"s{i}", f"depends_on: [s{i - 1}]\n")
    elif case == "ordinary_3001":
        for i in range(3001):
            _service(root, f"s{i}")
    elif case == "ordinary_1mb":
        size, i = 0, 0
        while size < 1_000_000:
            body = _ordinary(i)
            _service(root, f"s{i}", body)
            size += len(HEAD.format(name=f"s{i}")) + len(body)
            i += 1


CASES = {  # case -> (baseline it is compared with, whether render is timed too)
    "list_250k_items": ("ordinary_1mb", False),
    "aliases_100k": ("ordinary_1mb", False),
    "payload_1_1_mb": ("ordinary_1mb", False),
    "depends_on_chain_3001": ("ordinary_3001", True),
}
BASELINES = {"ordinary_1mb": False, "ordinary_3001": True}
WITH_RENDER = {**BASELINES, **{case: with_render for case, (_, with_render) in CASES.items()}}


def child(repo: str, with_render: bool) -> dict[str, Any]:
    from phrame.config_repo import load_directory, render, validate

    start = time.perf_counter()
    loaded, read_problems = load_directory(repo)
    problems = validate(loaded, read_problems)
    if with_render and not problems:
        render(loaded).topics()
    return {"seconds": time.perf_counter() - start, "rules": sorted({p.rule for p in problems})}


def run_child(repo: Path, with_render: bool) -> dict[str, Any]:
    paths = [str(ROOT), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(paths)}
    out = subprocess.run(
        [sys.executable, __file__, "--child", str(repo), "1" if with_render else "0"],
        check=True,
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        timeout=600,
    )
    result: dict[str, Any] = json.loads(out.stdout)
    return result


def _bytes(root: Path) -> int:
    return sum(p.stat().st_size for p in root.rglob("*.yaml"))


def main() -> int:
    report: dict[str, Any] = {"benchmark": "validate_hostile", "repetitions": REPETITIONS, "cases": {}}
    with tempfile.TemporaryDirectory(prefix="phrame-bench-hostile-") as tmp:
        roots = {}
        for case in [*BASELINES, *CASES]:
            roots[case] = Path(tmp) / case
            write_case(case, roots[case])
            print(f"validate_hostile: wrote {case}", file=sys.stderr)
        runs: dict[str, list[dict[str, Any]]] = {case: [] for case in roots}
        for rep in range(REPETITIONS):  # interleaved, so a slow spell of the machine hits all
            for case, root in roots.items():
                runs[case].append(
                    run_child(root, {**BASELINES, **{c: r for c, (_, r) in CASES.items()}}[case])
                )
            print(f"validate_hostile: repetition {rep + 1}/{REPETITIONS} done", file=sys.stderr)
        median = {case: statistics.median(r["seconds"] for r in rs) for case, rs in runs.items()}
        for case in BASELINES:
            report["cases"][case] = {"bytes": _bytes(roots[case]), "seconds": round(median[case], 3)}
        for case, (baseline, _) in CASES.items():
            report["cases"][case] = {
                "bytes": _bytes(roots[case]),
                "seconds": round(median[case], 3),
                "baseline": baseline,
                "ratio_to_baseline": round(median[case] / median[baseline], 2),
                "rules": runs[case][0]["rules"],
            }
    print(json.dumps(report))
    return 0


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "--child":
        print(json.dumps(child(sys.argv[2], sys.argv[3] == "1")))
        sys.exit(0)
    sys.exit(main())
