"""Regressions for what the fuzz suite (``tests/fuzz``) found, each reduced to its smallest
input: the fuzzers keep the class of input covered, these keep the exact case."""

from __future__ import annotations

from pathlib import Path

from config_repo import Problem, load_directory
from tests.unit.test_validate_limits import problems_of


def where(problems: list[Problem]) -> list[tuple[str, str, int, int]]:
    return [(p.file, p.rule, p.line, p.column) for p in problems]


def test_a_file_that_is_one_tagged_scalar_is_a_schema_problem_at_line_1(tmp_path: Path) -> None:
    """``!!str 0`` as a whole file: ruamel keeps a tagged scalar with no line; validation
    raised TypeError while placing the schema error."""
    problems = problems_of(tmp_path, {"environments/lab/environment.yaml": "!!str 0\n"})
    assert where(problems) == [("environments/lab/environment.yaml", "schema", 1, 1)]


def test_an_anchor_defined_twice_is_read_silently_the_later_one_wins(tmp_path: Path) -> None:
    """YAML 1.2 lets an anchor be defined again (an alias names the latest). ruamel warned
    through ``warnings`` (a multi-line message on config-sync's stderr per file, and an
    exception wherever warnings are errors, as in these tests) instead of reading it."""
    text = "name: n1\nlabels:\n  a: &v x\n  b: &v y\n  c: *v\n"
    assert problems_of(tmp_path, {"nodes/n1.yaml": text}) == []
    repo, _ = load_directory(tmp_path / "repo")
    assert repo.nodes["n1"].data["labels"] == {"a": "x", "b": "y", "c": "y"}
