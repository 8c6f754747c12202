"""A file with a schema error still has its well-formed parts checked by the semantic
rules: every problem in one run, no crash and no cascade from the
malformed parts. ``fixtures/mixed-problems/expected.txt`` holds the exact output."""

from __future__ import annotations

import shutil
from pathlib import Path

import git
import pytest

from phrame.cli import main
from phrame.config_repo import ReadCache, load, load_directory, validate
from phrame.config_repo.sources import GitSource

CASE = Path(__file__).resolve().parents[2] / "fixtures" / "mixed-problems"
EXPECTED = (CASE / "expected.txt").read_text().splitlines()


def test_schema_and_semantic_errors_of_one_file_in_one_run(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["validate", str(CASE)]) == 1
    assert capsys.readouterr().out.splitlines() == EXPECTED
    web = [line for line in EXPECTED if line.startswith("environments/lab/services/web.yaml")]
    assert {line.split(": ")[1] for line in web} >= {"schema", "unknown-dependency", "port-conflict"}
    # worker.yaml: depends_on, networks, placement and ports are all the wrong shape; only
    # the schema speaks about them (no per-character unknown-dependency, no crash)
    worker = [line for line in EXPECTED if "/worker.yaml:" in line]
    assert len(worker) == 4 and all(": schema: " in line for line in worker)


def test_a_cached_reading_reports_the_same(tmp_path: Path) -> None:
    """config-sync reads from git with a cache: the second reading takes the schema results
    (and which parts are sound) from the cache and must find the same problems."""
    work = tmp_path / "work"
    shutil.copytree(CASE, work)
    (work / "expected.txt").unlink()
    repo = git.Repo.init(work)
    repo.git.add(A=True)
    repo.index.commit("mixed")
    cache = ReadCache()
    runs = []
    for _ in range(2):
        loaded, read = load(GitSource(work, "HEAD"), cache=cache)
        runs.append([p.format() for p in validate(loaded, read, cache=cache)])
    assert cache.hits > 0
    assert runs[0] == runs[1] == EXPECTED


def test_a_wholly_malformed_service_is_only_a_schema_problem(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    shutil.copytree(CASE, root)
    (root / "environments/lab/services/web.yaml").write_text("- name: web\n- image: w:1\n")
    loaded, read = load_directory(root)
    rules = {(p.file.rsplit("/", 1)[-1], p.rule) for p in validate(loaded, read)}
    assert ("web.yaml", "schema") in rules
    assert {r for f, r in rules if f == "web.yaml"} == {"schema"}
