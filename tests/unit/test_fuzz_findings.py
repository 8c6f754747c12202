"""Regressions for what the fuzz suite (``tests/fuzz``) found, each reduced to its smallest
input: the fuzzers keep the class of input covered, these keep the exact case."""

from __future__ import annotations

from pathlib import Path

from config_repo import Problem
from tests.unit.test_validate_limits import problems_of


def where(problems: list[Problem]) -> list[tuple[str, str, int, int]]:
    return [(p.file, p.rule, p.line, p.column) for p in problems]


def test_a_file_that_is_one_tagged_scalar_is_a_schema_problem_at_line_1(tmp_path: Path) -> None:
    """``!!str 0`` as a whole file: ruamel keeps a tagged scalar with no line; validation
    raised TypeError while placing the schema error."""
    problems = problems_of(tmp_path, {"environments/lab/environment.yaml": "!!str 0\n"})
    assert where(problems) == [("environments/lab/environment.yaml", "schema", 1, 1)]
