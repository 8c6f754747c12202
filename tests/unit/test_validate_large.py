"""Large legal-looking files: a list or map of a million bytes, a flood of
aliases, a long ``depends_on`` chain, and a rendering no agent would accept. Each completes
and reports (or renders) correctly; how fast is measured by ``benchmarks/validate_hostile.py``,
not here (``problems_of`` only guards against a hang)."""

from __future__ import annotations

from pathlib import Path

import pytest

from phrame.config_repo import load_directory, render, validate
from phrame.config_repo.yaml_reading import MAX_VALUES
from tests.unit.test_validate_limits import BASE, problems_of, service

WEB = "environments/lab/services/web.yaml"


def test_a_list_of_250000_items_is_refused_while_it_is_read(tmp_path: Path) -> None:
    found = problems_of(tmp_path, service("web", "command:", *["- a"] * 250_000))
    assert [(p.file, p.rule) for p in found] == [(WEB, "file-too-large")], found
    # 11 values come before the list (the mapping, keys, values): item 19,990 is one too many
    assert found[0].line == 5 + MAX_VALUES - 10 and f"more than {MAX_VALUES} values" in found[0].message


def test_100000_aliases_are_refused_before_they_are_expanded(tmp_path: Path) -> None:
    body = "command: [" + ", ".join(["*a"] * 100_000) + "]"
    found = problems_of(tmp_path, service("web", "labels:", "  a: &a v", body))
    assert [(p.file, p.rule) for p in found] == [(WEB, "file-too-large")], found
    assert f"more than {MAX_VALUES} values" in found[0].message


@pytest.mark.parametrize(
    ("lines", "path", "limit"),
    [
        (["env:", *[f"  K{i}: v" for i in range(1001)]], "/env", "1001 entries; at most 1000"),
        (["command:", *["- a"] * 1001], "/command", "1001 items; at most 1000"),
        (["volumes:", *[f"- /h{i}:/c{i}" for i in range(1001)]], "/volumes", "1001 items; at most 1000"),
        (["labels:", *[f"  k{i}: v" for i in range(1001)]], "/labels", "1001 entries; at most 1000"),
    ],
)
def test_lists_and_maps_of_a_service_are_capped(
    tmp_path: Path, lines: list[str], path: str, limit: str
) -> None:
    found = problems_of(tmp_path, service("web", *lines))
    assert [(p.rule, p.path) for p in found] == [("schema", path)], found
    assert limit in found[0].message and len(found[0].message) < 200


def test_a_chain_of_3001_dependencies_validates_and_renders_in_order(tmp_path: Path) -> None:
    files = {**BASE, **service("s0")}
    for i in range(1, 3001):
        files |= service(f"s{i}", f"depends_on: [s{i - 1}]")
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    repo, read = load_directory(tmp_path)
    assert validate(repo, read) == []
    items = render(repo).nodes["n1"].items
    assert items["containers/lab.s3000.0"]["depends_on"] == ["lab.s2999.0"]
    assert items["containers/lab.s1.0"]["depends_on"] == ["lab.s0.0"]
    assert items["containers/lab.s0.0"]["depends_on"] == []


def test_a_rendered_container_over_1_mib_is_refused_at_the_service(tmp_path: Path) -> None:
    big = "x" * 11_000  # 100 aliases of it: a 12 KB file renders to 1.1 MB
    env = ["env:", f"  A0: &a {big}", *[f"  A{i}: *a" for i in range(1, 100)]]
    found = problems_of(tmp_path, service("web", *env))
    assert [(p.file, p.rule, p.line) for p in found] == [(WEB, "payload-too-large", 6)], found
    assert "container lab.web.0 for node n1" in found[0].message
    assert "1048576" in found[0].message


def test_a_manifest_over_1_mib_is_refused_at_the_node(tmp_path: Path) -> None:
    files: dict[str, str] = {}
    for i in range(12):
        files |= service(f"s{i}", "replicas: 1000")
    found = problems_of(tmp_path, files)
    assert [(p.file, p.rule) for p in found] == [("nodes/n1.yaml", "payload-too-large")], found
    assert "manifest of node n1" in found[0].message and "12000 items" in found[0].message


def test_a_payload_just_under_the_limit_is_fine(tmp_path: Path) -> None:
    env = ["env:", f"  A0: &a {'x' * 9_000}", *[f"  A{i}: *a" for i in range(1, 100)]]
    assert problems_of(tmp_path, service("web", *env)) == []


def test_a_manifest_is_measured_exactly_at_the_limit() -> None:
    """The manifest check bounds a manifest's size without encoding it; near the limit it
    measures exactly: refused one byte over, accepted at the limit."""
    from phrame.config_repo.payload_size import payload_problems
    from schemas import canonical_json

    sample = Path(__file__).resolve().parents[2] / "fixtures" / "phrame-config"
    repo, read = load_directory(sample)
    repo.commit = "a" * 40
    assert validate(repo, read) == []
    manifests = {n: len(canonical_json(d.manifest)) for n, d in render(repo).nodes.items()}
    node, size = max(manifests.items(), key=lambda kv: kv[1])
    at_limit = [p for p in payload_problems(repo, limit=size) if "manifest" in p.message]
    assert at_limit == []
    over = [p for p in payload_problems(repo, limit=size - 1) if "manifest" in p.message]
    assert [p.file for p in over] == [f"nodes/{node}.yaml"] and f"renders to {size} bytes" in over[0].message
