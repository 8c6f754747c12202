"""How a benchmark declares its figures, and how they are read off its JSON (``make bench``).

Every benchmark (benchmarks/*.py but the Makefile's BENCH_HELPERS) holds a literal
``FIGURES = [...]`` of dicts: ``name``; ``value``, a dotted path to the measured number in the
JSON it prints (``"a.b.c"``); ``unit``; ``baseline``, a dotted path to the baseline measured in
the same run, or None; ``target``, a number, a dotted path, or None (reported, not judged);
``check``, ``"value"`` (default) or ``"ratio"``, which of the two the target bounds; ``op``,
``"<="`` (default), ``"<"``, ``">="``, ``">"`` or ``"=="``. ``report.py`` reads the list with
``ast`` (never by importing: no Docker, broker or browser needed) and never runs a benchmark.
"""

from __future__ import annotations

import ast
import math
import operator
from collections.abc import Callable
from pathlib import Path
from typing import Any

KEYS = {"name", "value", "unit", "baseline", "target", "check", "op"}
REQUIRED = {"name", "value", "unit"}
OPS: dict[str, Callable[[Any, Any], bool]] = {
    "<=": operator.le,
    "<": operator.lt,
    ">=": operator.ge,
    ">": operator.gt,
    "==": operator.eq,
}


class FigureError(ValueError):
    """A benchmark's FIGURES declaration is missing or malformed (the message names the file)."""


def declared(module: Path) -> list[dict[str, Any]]:
    """The FIGURES list of a benchmark module, checked; FigureError says what and where."""
    tree = ast.parse(module.read_text(), filename=str(module))
    for node in tree.body:
        targets = node.targets if isinstance(node, ast.Assign) else []
        if any(isinstance(t, ast.Name) and t.id == "FIGURES" for t in targets):
            assert isinstance(node, ast.Assign)
            try:
                specs = ast.literal_eval(node.value)
            except ValueError as e:
                raise FigureError(f"{module}:{node.lineno}: FIGURES must be a literal list ({e})") from e
            return [check_spec(spec, f"{module}:{node.lineno}: FIGURES[{i}]") for i, spec in enumerate(specs)]
    raise FigureError(f"{module}: no top-level FIGURES = [...] (see benchmarks/figures.py)")


def check_spec(spec: Any, where: str) -> dict[str, Any]:
    if not isinstance(spec, dict):
        raise FigureError(f"{where}: a figure is a dict, not {type(spec).__name__}")
    if missing := REQUIRED - spec.keys():
        raise FigureError(f"{where}: missing {sorted(missing)}")
    if unknown := spec.keys() - KEYS:
        raise FigureError(f"{where}: unknown keys {sorted(unknown)}")
    if spec.get("op", "<=") not in OPS:
        raise FigureError(f"{where}: op {spec['op']!r} is not one of {sorted(OPS)}")
    if spec.get("check", "value") not in ("value", "ratio"):
        raise FigureError(f"{where}: check {spec['check']!r} is neither 'value' nor 'ratio'")
    if spec.get("check") == "ratio" and not spec.get("baseline"):
        raise FigureError(f"{where}: check 'ratio' needs a baseline")
    return spec


def lookup(doc: Any, path: str | None) -> Any:
    """The value at a dotted path, or None where any step is missing."""
    if path is None:
        return None
    for key in path.split("."):
        if not isinstance(doc, dict) or key not in doc:
            return None
        doc = doc[key]
    return doc


def is_number(x: Any) -> bool:
    return isinstance(x, int | float) and not isinstance(x, bool)


def evaluate(doc: dict[str, Any], specs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each declared figure as {name, value, unit, baseline, ratio, target, met, check, op}.

    ``ratio`` is value / baseline when both are numbers; ``met`` is None when it cannot be
    judged (no target, or the value, the baseline or the target is missing from the run).
    """
    out = []
    for spec in specs:
        value, baseline = lookup(doc, spec["value"]), lookup(doc, spec.get("baseline"))
        target = spec.get("target")
        if isinstance(target, str):
            target = lookup(doc, target)
        ratio = round(value / baseline, 4) if is_number(value) and is_number(baseline) and baseline else None
        check, op = spec.get("check", "value"), spec.get("op", "<=")
        subject = ratio if check == "ratio" else value
        met = None
        if target is not None and subject is not None and (is_number(subject) == is_number(target)):
            met = bool(OPS[op](subject, target))
        out.append(
            {
                "name": spec["name"],
                "value": value,
                "unit": spec["unit"],
                "baseline": baseline,
                "ratio": ratio,
                "target": target,
                "met": met,
                "check": check,
                "op": op,
            }
        )
    return out


def percentile(values: list[float], q: float) -> float:
    """The nearest-rank ``q`` quantile (0 < q <= 1) of ``values``: a value that was measured."""
    ordered = sorted(values)
    return ordered[max(0, min(len(ordered), math.ceil(q * len(ordered))) - 1)]
