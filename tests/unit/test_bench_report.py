"""The benchmark report (benchmarks/report.py, benchmarks/figures.py): benchmark JSON and FIGURES
declarations → out/bench.json figures and the Markdown table; met and unmet targets, missing
baselines, failed runs, the fault suite's file present or absent, the docs pages' blocks. No
benchmark is run here (the slow ones take minutes); their declarations are read as text."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
if str(BENCHMARKS) not in sys.path:
    sys.path.insert(0, str(BENCHMARKS))

from figures import FigureError, declared, evaluate  # noqa: E402  (benchmarks/ is not a package)
from report import BEGIN, END, FAULTS_BEGIN, FAULTS_END, collect, main, render, replace_block  # noqa: E402

SPEC = """\"\"\"Benchmark: a toy. Baseline: the bare thing. Target: at most 2x.\"\"\"
FIGURES = [
    {"name": "toy time", "value": "toy_s", "unit": "s", "baseline": "bare_s", "target": "target_ratio",
     "check": "ratio"},
    {"name": "toy RSS", "value": "mem.rss_mb", "unit": "MB", "baseline": None, "target": 100, "op": "<"},
    {"name": "toy note", "value": "count", "unit": "", "baseline": None, "target": None},
]
"""


def write_run(tmp: Path, doc: dict[str, Any], spec: str = SPEC, name: str = "toy") -> tuple[Path, Path]:
    modules, runs = tmp / "benchmarks", tmp / "out" / "bench"
    modules.mkdir(parents=True, exist_ok=True)
    runs.mkdir(parents=True, exist_ok=True)
    (modules / f"{name}.py").write_text(spec)
    (runs / f"{name}.json").write_text(json.dumps(doc))
    return modules, runs


def rows(md: str, first_cell: str) -> list[list[str]]:
    return [
        [c.strip() for c in line.strip("|").split("|")]
        for line in md.splitlines()
        if line.startswith(f"| {first_cell}")
    ]


def test_figures_met_and_unmet_go_into_json_and_table(tmp_path: Path) -> None:
    doc = {"toy_s": 3.0, "bare_s": 1.0, "target_ratio": 2.0, "mem": {"rss_mb": 42.5}, "count": 7}
    modules, runs_dir = write_run(tmp_path, doc)
    (runs_dir / "toy.load").write_text("3.42 2.00 1.00 1/100 123\n")
    runs = collect(runs_dir, modules)
    figs = {f["name"]: f for f in runs["toy"]["figures"]}
    assert figs["toy time"] == {"name": "toy time", "value": 3.0, "unit": "s", "baseline": 1.0, "ratio": 3.0,
                                "target": 2.0, "met": False, "check": "ratio", "op": "<="}  # fmt: skip
    assert figs["toy RSS"]["met"] is True and figs["toy RSS"]["ratio"] is None
    assert figs["toy note"]["met"] is None
    assert runs["toy"]["toy_s"] == 3.0 and runs["toy"]["load1_before"] == 3.42  # existing keys kept
    md = render(runs)
    assert "load average before each benchmark: 3.4–3.4" in md
    table = rows(md, "`toy`")
    assert table == [
        ["`toy`", "toy time", "3 s", "1 s", "3×", "≤ 2×", "✘"],
        ["`toy`", "toy RSS", "42.5 MB", "—", "—", "< 100 MB", "✔"],
        ["`toy`", "toy note", "7", "—", "—", "—", "—"],
    ]


def test_missing_baseline_or_value_is_not_judged(tmp_path: Path) -> None:
    # bare_s absent from this run: no ratio, so a ratio target cannot be met or missed
    modules, runs_dir = write_run(tmp_path, {"toy_s": 3.0, "target_ratio": 2.0, "count": 1})
    figs = {f["name"]: f for f in collect(runs_dir, modules)["toy"]["figures"]}
    assert figs["toy time"]["baseline"] is None and figs["toy time"]["ratio"] is None
    assert figs["toy time"]["met"] is None
    assert figs["toy RSS"]["value"] is None and figs["toy RSS"]["met"] is None
    md = render(collect(runs_dir, modules))
    assert rows(md, "`toy`")[0] == ["`toy`", "toy time", "3 s", "—", "—", "≤ 2×", "—"]


def test_a_run_that_failed_is_a_row_saying_so(tmp_path: Path) -> None:
    modules, runs_dir = write_run(tmp_path, {"benchmark": "toy", "error": "no mosquitto"})
    runs = collect(runs_dir, modules)
    assert runs["toy"]["figures"] == []
    assert rows(render(runs), "`toy`") == [["`toy`", "did not run: no mosquitto", "—", "—", "—", "—", "—"]]
    (runs_dir / "toy.json").write_text("")  # crashed before printing (make bench goes on)
    assert (
        rows(render(collect(runs_dir, modules)), "`toy`")[0][1]
        == "did not run: printed nothing (see make bench's output)"
    )


def test_equality_target_on_a_ratio() -> None:
    spec = [{"name": "moved", "value": "m", "unit": "", "baseline": "lost", "target": 1, "check": "ratio",
             "op": "=="}]  # fmt: skip
    assert evaluate({"m": 3, "lost": 3}, spec)[0]["met"] is True
    assert evaluate({"m": 4, "lost": 3}, spec)[0]["met"] is False


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ('"""x"""\nA = 1\n', "no top-level FIGURES"),
        ("FIGURES = [{'name': 'a', 'unit': 's'}]\n", "missing ['value']"),
        ("FIGURES = [{'name': 'a', 'value': 'v', 'unit': 's', 'op': '~'}]\n", "op '~'"),
        ("FIGURES = [{'name': 'a', 'value': 'v', 'unit': 's', 'check': 'ratio'}]\n", "needs a baseline"),
        ("FIGURES = [{'name': 'a', 'value': 'v', 'unit': 's', 'goal': 1}]\n", "unknown keys ['goal']"),
        ("FIGURES = make()\n", "must be a literal"),
    ],
)
def test_bad_declarations_say_what_and_where(tmp_path: Path, spec: str, message: str) -> None:
    module = tmp_path / "bad.py"
    module.write_text(spec)
    with pytest.raises(FigureError, match=r"bad\.py") as e:
        declared(module)
    assert message in str(e.value)


def test_faults_table_when_the_file_exists(tmp_path: Path) -> None:
    modules, runs_dir = write_run(tmp_path, {"toy_s": 1.0, "bare_s": 1.0, "target_ratio": 2.0})
    runs = collect(runs_dir, modules)
    faults = tmp_path / "faults.json"
    assert "| fault |" not in render(runs, faults)  # absent: no second table
    faults.write_text(json.dumps([
        {"fault": "mosquitto restarted", "bound_s": 30, "recovery_s": 4.2, "containers_lost": 0},
        {"fault": "dockerd restarted", "bound_s": 60, "recovery_s": 75.0, "containers_lost": 0},
        {"fault": "agent SIGKILL x5", "bound_s": 60, "recovery_s": 12.0, "containers_lost": 1},
        {"fault": "host reboot", "bound_s": 90, "recovery_s": 20.0, "containers_lost": 0, "unmanaged_touched": 1},
        {"fault": "clock skew", "bound_s": 30, "recovery_s": 0.5, "containers_lost": 0, "unmanaged_touched": 0},
    ]))  # fmt: skip
    md = render(runs, faults)
    assert rows(md, "mosquitto") == [["mosquitto restarted", "30 s", "4.2 s", "0", "—", "✔"]]
    assert rows(md, "dockerd") == [["dockerd restarted", "60 s", "75 s", "0", "—", "✘"]]  # too slow
    assert rows(md, "agent") == [["agent SIGKILL x5", "60 s", "12 s", "1", "—", "✘"]]  # a container lost
    assert rows(md, "host") == [["host reboot", "90 s", "20 s", "0", "1", "✘"]]  # not its container
    assert rows(md, "clock") == [["clock skew", "30 s", "0.5 s", "0", "0", "✔"]]
    faults.write_text(json.dumps([{"fault": "x", "bound_s": 1}]))
    with pytest.raises(ValueError, match=r"faults.json\[0\]: missing \['containers_lost', 'recovery_s'\]"):
        render(runs, faults)


def test_page_block_replaced_and_nothing_else(tmp_path: Path) -> None:
    page = f"# Performance\n\nprose above\n{BEGIN}\nold table\n{END}\nnotes below\n"
    out = replace_block(page, "| new | table |\n")
    assert out == f"# Performance\n\nprose above\n{BEGIN}\n| new | table |\n{END}\nnotes below\n"
    assert replace_block(out, "| new | table |\n") == out  # idempotent
    with pytest.raises(ValueError, match=r"performance\.md: no <!-- bench:begin -->"):
        replace_block("# no block\n", "x")


def test_cli_writes_json_md_and_the_performance_page(tmp_path: Path) -> None:
    modules, runs_dir = write_run(tmp_path, {"toy_s": 1.0, "bare_s": 1.0, "target_ratio": 2.0})
    out_json, out_md, docs = tmp_path / "bench.json", tmp_path / "bench.md", tmp_path / "docs"
    docs.mkdir()
    page = docs / "performance.md"
    page.write_text(f"a\n{BEGIN}\n{END}\nb\n")
    import report

    report.HERE = modules  # the toy module stands where benchmarks/ would
    try:
        argv = ["--bench-dir", str(runs_dir), "--json", str(out_json), "--md", str(out_md)]
        assert main([*argv, "--faults", str(tmp_path / "none.json")]) == 0
    finally:
        report.HERE = BENCHMARKS
    assert json.loads(out_json.read_text())["toy"]["figures"][0]["met"] is True
    none = str(tmp_path / "none.json")
    assert main(["--md", str(out_md), "--faults", none, "--docs", str(docs)]) == 0
    assert out_md.read_text() in page.read_text() and page.read_text().endswith(f"{END}\nb\n")
    assert not (docs / "faults.md").exists()  # no fault records: that page is not touched


def test_faults_page_block_from_the_fault_records_alone(tmp_path: Path) -> None:
    """The fault suite run alone (no ``make bench``) still updates the faults page, in case order."""
    docs, faults = tmp_path / "docs", tmp_path / "faults.json"
    docs.mkdir()
    performance, page = docs / "performance.md", docs / "faults.md"
    performance.write_text(f"a\n{BEGIN}\nbench\n{END}\nb\n")
    page.write_text(f"a\n{FAULTS_BEGIN}\nold\n{FAULTS_END}\nc\n")
    faults.write_text(json.dumps([
        {"fault": "10 host reboot", "bound_s": 60, "recovery_s": 4.5, "containers_lost": 0},
        {"fault": "2 dockerd restarted", "bound_s": 30, "recovery_s": 3.0, "containers_lost": 0},
    ]))  # fmt: skip
    argv = ["--md", str(tmp_path / "no-bench.md"), "--faults", str(faults), "--docs", str(docs)]
    assert main(argv) == 0
    assert performance.read_text() == f"a\n{BEGIN}\nbench\n{END}\nb\n"  # no bench run: untouched
    block = page.read_text().split(FAULTS_BEGIN, 1)[1].split(FAULTS_END, 1)[0]
    assert "old" not in block and block.index("2 dockerd") < block.index("10 host reboot")
    page.write_text("no markers\n")
    assert main(argv) == 1  # says where the block is missing, writes nothing
    assert page.read_text() == "no markers\n"
    assert (
        main(["--md", str(tmp_path / "x.md"), "--faults", str(tmp_path / "y.json"), "--docs", str(docs)]) == 1
    )


def test_a_missing_block_writes_no_page(tmp_path: Path) -> None:
    """Both sources there, the faults page without its block: neither page is written."""
    docs, md, faults = tmp_path / "docs", tmp_path / "bench.md", tmp_path / "faults.json"
    docs.mkdir()
    (docs / "performance.md").write_text(f"{BEGIN}\nold\n{END}\n")
    (docs / "faults.md").write_text("no markers\n")
    md.write_text("| new |\n")
    faults.write_text(json.dumps([{"fault": "1 x", "bound_s": 1, "recovery_s": 0.5, "containers_lost": 0}]))
    assert main(["--md", str(md), "--faults", str(faults), "--docs", str(docs)]) == 1
    assert (docs / "performance.md").read_text() == f"{BEGIN}\nold\n{END}\n"


def test_faults_page_holds_the_one_faults_block() -> None:
    page = (BENCHMARKS.parent / "docs" / "faults.md").read_text()
    assert page.count(FAULTS_BEGIN) == 1 and page.count(FAULTS_END) == 1


def benchmark_modules() -> list[Path]:
    """benchmarks/*.py that ``make bench`` runs: all but the Makefile's BENCH_HELPERS."""
    makefile = (BENCHMARKS.parent / "Makefile").read_text()
    helpers_text = makefile.split("BENCH_HELPERS :=", 1)[1].split("\n\n", 1)[0].split("PHRAME_", 1)[0]
    helpers = {Path(w).name for w in helpers_text.replace("\\", " ").split() if w.endswith(".py")}
    assert {"figures.py", "report.py", "repo_gen.py"} <= helpers
    return [p for p in sorted(BENCHMARKS.glob("*.py")) if p.name not in helpers]


# path steps the module builds instead of writing out (payload_sizes: f"{kind}_bytes")
BUILT_KEYS = {"heartbeat_bytes"}


@pytest.mark.parametrize("module", benchmark_modules(), ids=lambda p: p.stem)
def test_every_benchmark_declares_figures_baseline_and_target(module: Path) -> None:
    import ast

    specs = declared(module)  # FigureError when missing or malformed
    assert specs, f"{module}: FIGURES is empty"
    doc = (ast.get_docstring(ast.parse(module.read_text())) or "").lower()
    assert "baseline" in doc, f"{module}: the docstring names no baseline (say 'Baseline: none' and why)"
    assert "target" in doc, f"{module}: the docstring names no target (say 'Target: none' and why)"
    source = (
        module.read_text().split("FIGURES = [", 1)[0]
        + module.read_text().split("FIGURES = [", 1)[1].split("]\n", 1)[1]
    )
    for spec in specs:  # every key a figure reads is one the module writes (a typo reads as missing)
        paths = [spec["value"], spec.get("baseline"), spec.get("target")]
        for path in (p for p in paths if isinstance(p, str)):
            for step in path.split("."):
                assert step in BUILT_KEYS or f'"{step}"' in source, (
                    f"{module}: {spec['name']}: {step!r} is never written"
                )


def test_performance_page_holds_the_one_bench_block() -> None:
    page = (BENCHMARKS.parent / "docs" / "performance.md").read_text()
    assert page.count(BEGIN) == 1 and page.count(END) == 1
    assert page.index(BEGIN) < page.index(END)
