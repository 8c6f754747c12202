"""The benchmark report: out/bench/*.json → out/bench.json and the Markdown table out/bench.md.

``make bench`` runs it after the benchmarks; ``make bench-docs`` (``--docs docs``) copies
out/bench.md verbatim between the ``<!-- bench:begin -->`` and ``<!-- bench:end -->`` markers
of docs/performance.md, and the fault table between ``<!-- faults:begin -->`` and
``<!-- faults:end -->`` of docs/faults.md, each when its source exists. Each run gains
``figures`` from its module's FIGURES (benchmarks/figures.py). When out/faults.json exists
(the fault suite's [{fault, bound_s, recovery_s, containers_lost}]), a second table lists
it. It never runs a benchmark and never edits a page outside the markers.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from figures import declared, evaluate, is_number

HERE = Path(__file__).resolve().parent
BEGIN, END = "<!-- bench:begin -->", "<!-- bench:end -->"
FAULTS_BEGIN, FAULTS_END = "<!-- faults:begin -->", "<!-- faults:end -->"
PERFORMANCE_PAGE, FAULTS_PAGE = "performance.md", "faults.md"  # in the docs folder
SIGNS = {"<=": "≤", "<": "<", ">=": "≥", ">": ">", "==": "="}
MARKS = {True: "✔", False: "✘", None: "—"}


def collect(bench_dir: Path, modules: Path | None = None) -> dict[str, dict[str, Any]]:
    """Every run in bench_dir by name, each with its figures and the load average before it."""
    modules = modules or HERE
    runs: dict[str, dict[str, Any]] = {}
    for path in sorted(bench_dir.glob("*.json")):
        text = path.read_text()
        try:
            doc = json.loads(text) if text.strip() else {"error": "printed nothing (see make bench's output)"}
        except json.JSONDecodeError as e:
            doc = {"error": f"{path}: not JSON ({e})"}
        if not isinstance(doc, dict):
            doc = {"error": f"{path}: not a JSON object"}
        load = path.with_suffix(".load")
        if load.exists():  # the Makefile writes /proc/loadavg there before each benchmark
            doc["load1_before"] = float(load.read_text().split()[0])
            doc["started_at"] = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(load.stat().st_mtime))
        doc["figures"] = [] if "error" in doc else evaluate(doc, declared(modules / f"{path.stem}.py"))
        runs[path.stem] = doc
    return runs


def fmt(x: Any) -> str:
    if x is None:
        return "—"
    if isinstance(x, bool):
        return "yes" if x else "no"
    if not is_number(x):
        return str(x)
    if abs(x) >= 100:
        return f"{x:,.0f}"
    if abs(x) >= 10:
        return f"{x:.1f}".removesuffix(".0")
    return f"{x:.3g}"


def with_unit(x: Any, unit: str) -> str:
    return fmt(x) if x is None or isinstance(x, bool) or not unit else f"{fmt(x)} {unit}"


def target_text(fig: dict[str, Any]) -> str:
    if fig["target"] is None:
        return "—"
    sign = SIGNS[fig["op"]]
    if fig["check"] == "ratio":
        return f"{sign} {fmt(fig['target'])}×"
    return f"{sign} {with_unit(fig['target'], fig['unit'])}"


def header(runs: dict[str, dict[str, Any]]) -> str:
    loads = [r["load1_before"] for r in runs.values() if "load1_before" in r]
    starts = sorted(r["started_at"] for r in runs.values() if "started_at" in r)
    when = f"{starts[0]}" if starts else "unknown time"
    load = f"{min(loads):.1f}–{max(loads):.1f}" if loads else "not recorded"
    return (
        f"Measured by `make bench` ({when}, {len(runs)} benchmarks, {os.cpu_count()} cores); "
        f"1-minute load average before each benchmark: {load}. Baselines are measured in the same run."
    )


def bench_table(runs: dict[str, dict[str, Any]]) -> list[str]:
    lines = [
        "| benchmark | figure | value | baseline (same run) | ratio | target | met |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, run in runs.items():
        if "error" in run:
            lines.append(f"| `{name}` | did not run: {run['error']} | — | — | — | — | — |")
        for fig in run.get("figures", []):
            ratio = "—" if fig["ratio"] is None else f"{fmt(fig['ratio'])}×"
            lines.append(
                f"| `{name}` | {fig['name']} | {with_unit(fig['value'], fig['unit'])} | "
                f"{with_unit(fig['baseline'], fig['unit'])} | {ratio} | {target_text(fig)} | "
                f"{MARKS[fig['met']]} |"
            )
    return lines


def faults_table(faults: Any, where: str) -> list[str]:
    """One row per fault; ``unmanaged_touched`` (optional) must be 0 too where the suite gives it."""
    if not isinstance(faults, list):
        raise ValueError(f"{where}: expected a list of {{fault, bound_s, recovery_s, containers_lost}}")
    lines = [
        "| fault | bound | recovery | containers lost | unmanaged touched | met |",
        "|---|---:|---:|---:|---:|---|",
    ]
    for i, row in sorted(enumerate(faults), key=lambda pair: _case(pair[1])):
        missing = {"fault", "bound_s", "recovery_s", "containers_lost"} - set(
            row if isinstance(row, dict) else ()
        )
        if missing:
            raise ValueError(f"{where}[{i}]: missing {sorted(missing)}")
        bound, took, lost = row["bound_s"], row["recovery_s"], row["containers_lost"]
        touched = row.get("unmanaged_touched")
        met = is_number(took) and is_number(bound) and took <= bound and lost == 0 and touched in (None, 0)
        lines.append(
            f"| {row['fault']} | {with_unit(bound, 's')} | {with_unit(took, 's')} | {fmt(lost)} | "
            f"{fmt(touched)} | {MARKS[met]} |"
        )
    return lines


def _case(row: Any) -> int:
    """The case number a fault's name starts with ("10 host reboot" -> 10), for the row order."""
    head = str(row.get("fault", "") if isinstance(row, dict) else "").split(" ", 1)[0]
    return int(head) if head.isdigit() else 99


def render(runs: dict[str, dict[str, Any]], faults_path: Path | None = None) -> str:
    """out/bench.md: the header line, the figures table, and the fault table when the file exists."""
    parts = [header(runs), "", *bench_table(runs)]
    if faults_path is not None and faults_path.exists():
        faults = json.loads(faults_path.read_text())
        parts += ["", f"Fault suite (`{faults_path.name}`): recovery after each fault ends.", ""]
        parts += faults_table(faults, str(faults_path))
    return "\n".join(parts) + "\n"


def replace_block(
    page: str, block: str, where: str = PERFORMANCE_PAGE, markers: tuple[str, str] = (BEGIN, END)
) -> str:
    """page with the text between ``markers`` replaced by block (markers kept)."""
    begin, end_mark = markers
    start, end = page.find(begin), page.find(end_mark)
    if start < 0 or end < start:
        raise ValueError(f"{where}: no {begin} … {end_mark} block to replace")
    return page[: start + len(begin)] + "\n" + block.rstrip("\n") + "\n" + page[end:]


def update_docs(docs: Path, md: Path, faults: Path) -> list[str]:
    """Copy ``md`` into performance.md's bench block and the table of ``faults`` into
    faults.md's block, each when its source exists; what was replaced (ValueError when
    neither exists or a block is missing, and then no page is written)."""
    pages: dict[Path, str] = {}
    done = []
    if md.exists():
        page = docs / PERFORMANCE_PAGE
        pages[page] = replace_block(page.read_text(), md.read_text(), str(page))
        done.append(f"bench block of {page} from {md}")
    if faults.exists():
        page = docs / FAULTS_PAGE
        table = "\n".join(faults_table(json.loads(faults.read_text()), str(faults)))
        pages[page] = replace_block(page.read_text(), table, str(page), (FAULTS_BEGIN, FAULTS_END))
        done.append(f"faults block of {page} from {faults}")
    if not done:
        raise ValueError(f"neither {md} nor {faults} is there; run `make bench` or the fault suite first")
    for page, text in pages.items():
        page.write_text(text)
    return done


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bench-dir", type=Path, default=Path("out/bench"))
    ap.add_argument("--json", type=Path, default=Path("out/bench.json"))
    ap.add_argument("--md", type=Path, default=Path("out/bench.md"))
    ap.add_argument("--faults", type=Path, default=Path("out/faults.json"))
    ap.add_argument(
        "--docs",
        type=Path,
        help=f"copy --md into DOCS/{PERFORMANCE_PAGE}, the --faults table into DOCS/{FAULTS_PAGE}; then stop",
    )
    args = ap.parse_args(argv)
    try:
        if args.docs:
            done = update_docs(args.docs, args.md, args.faults)
            print(f"replaced the {' and the '.join(done)}")
            return 0
        runs = collect(args.bench_dir)
        args.json.write_text(json.dumps(runs, indent=2, sort_keys=True) + "\n")
        args.md.write_text(render(runs, args.faults))
    except ValueError as e:  # FigureError, a bad faults file, a missing block
        print(f"bench report: {e}", file=sys.stderr)
        return 1
    print(f"{args.json}: {len(runs)} benchmark(s); {args.md}: the table")
    return 0


if __name__ == "__main__":
    sys.exit(main())
