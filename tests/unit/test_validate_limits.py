"""Inputs a push can use against the validator itself: huge port ranges, deep nesting,
long dependency chains and odd characters must give a problem (or none) at once, never a
hang or a traceback. Plus ``replaces`` across nodes and ports of services scaled to zero."""

from __future__ import annotations

import json
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from phrame.config_repo import Problem, load_directory, validate
from phrame.config_repo.yaml_reading import MAX_DEPTH

GUARD_SECONDS = 10  # a guard against a hang, not a timing assertion

BASE = {
    "nodes/n1.yaml": "name: n1\nlabels:\n  role: edge\n",
    "nodes/n2.yaml": "name: n2\nlabels:\n  role: edge\n",
    "environments/lab/environment.yaml": "name: lab\ntrack: main\n",
}


def problems_of(tmp_path: Path, files: Mapping[str, str | bytes]) -> list[Problem]:
    """Validate a small repo (n1, n2, environment lab, plus ``files``), failing the test
    instead of waiting when validation does not finish within the guard."""
    root = tmp_path / "repo"
    for name, content in {**BASE, **files}.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content)
    outcome: dict[str, Any] = {}

    def run() -> None:
        try:
            repo, read = load_directory(root)
            outcome["problems"] = validate(repo, read)
        except BaseException as e:  # handed to the test thread below
            outcome["error"] = e

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    worker.join(GUARD_SECONDS)
    assert not worker.is_alive(), f"validate still running after {GUARD_SECONDS}s"
    if "error" in outcome:
        raise outcome["error"]
    problems: list[Problem] = outcome["problems"]
    return problems


def service(name: str, *lines: str, node: str = "n1") -> dict[str, str]:
    body = "\n".join([f"name: {name}", "image: x:1", "placement:", f"  node: {node}", *lines])
    return {f"environments/lab/services/{name}.yaml": body + "\n"}


# -- ports ---------------------------------------------------------------------------------


@pytest.mark.parametrize("spec", ["1-65535", "1-30000:1-30000"])
def test_huge_port_range_on_replicas_is_refused_at_once(tmp_path: Path, spec: str) -> None:
    found = problems_of(tmp_path, service("web", "replicas: 3", f'ports: ["{spec}"]'))
    assert [(p.rule, p.line, p.column, p.path) for p in found] == [("too-many-ports", 6, 9, "/ports/0")]
    assert "at most 1024" in found[0].message


def test_many_services_with_many_ports_are_checked_in_linear_time(tmp_path: Path) -> None:
    files: dict[str, str | bytes] = {}
    for k in range(60):  # 60,000 host ports on one node: quadratic checking would take minutes
        lo = 1 + k * 1000
        files.update(service(f"s{k}", f'ports: ["{lo}-{lo + 999}:{lo}-{lo + 999}/udp"]'))
    files.update(service("late", 'ports: ["127.0.0.1:59999:80/udp"]'))
    (p,) = problems_of(tmp_path, files)
    assert (p.rule, p.file) == ("port-conflict", "environments/lab/services/s59.yaml")
    assert "host port 59999/udp on node n1 is already published by lab.late.0" in p.message


def test_replicas_on_one_node_clash_once_and_ranges_up_to_the_limit_pass(tmp_path: Path) -> None:
    found = problems_of(tmp_path, service("web", "replicas: 3", 'ports: ["1-1024:1-1024"]'))
    assert {(p.rule, p.path) for p in found} == {("port-conflict", "/ports/0")}
    assert all("already published by lab.web.0" in p.message for p in found)


def test_port_conflicts_respect_addresses_and_protocols(tmp_path: Path) -> None:
    files: dict[str, str | bytes] = {
        **service("a", 'ports: ["127.0.0.1:9000:80", "9001:80/udp"]'),
        **service("b", 'ports: ["127.0.0.2:9000:80", "9001:80"]'),  # other address, other protocol
        **service("c", 'ports: ["9002:80"]', node="n2"),
        **service("d", 'ports: ["0.0.0.0:9000:80"]'),  # all addresses: clashes with a
    }
    (p,) = problems_of(tmp_path, files)
    assert (p.file, p.rule) == ("environments/lab/services/d.yaml", "port-conflict")
    assert "9000/tcp on node n1 is already published by lab.a.0" in p.message


def test_bad_port_of_a_service_scaled_to_zero_is_reported(tmp_path: Path) -> None:
    (p,) = problems_of(tmp_path, service("web", "replicas: 0", 'ports: ["8000-8001:80"]'))
    assert (p.rule, p.path) == ("port-syntax", "/ports/0")
    assert "differ in length" in p.message


# -- nesting -------------------------------------------------------------------------------


def test_deeply_nested_yaml_is_a_syntax_problem(tmp_path: Path) -> None:
    deep = "labels: " + "[" * 400 + "]" * 400
    (p,) = problems_of(tmp_path, service("web", deep))
    assert (p.file, p.rule, p.line) == ("environments/lab/services/web.yaml", "yaml-syntax", 5)
    assert "nested too deeply" in p.message


def test_nesting_within_the_limit_reaches_the_schema(tmp_path: Path) -> None:
    ok = "labels:\n  deep: " + "[" * (MAX_DEPTH - 3) + "]" * (MAX_DEPTH - 3)
    (p,) = problems_of(tmp_path, service("web", ok))
    assert p.rule == "schema"  # labels are strings: parsed fine, refused by the schema


def test_aliases_that_nest_past_the_limit_are_refused(tmp_path: Path) -> None:
    # every anchor nests the previous one again: few lines, unbounded depth once expanded
    lines = ["x:", "  a0: &a0 " + "[" * 30 + "]" * 30]
    lines += [f"  a{i}: &a{i} " + "[" * 30 + f"*a{i - 1}" + "]" * 30 for i in range(1, 20)]
    (p,) = problems_of(tmp_path, service("web", *lines))
    assert p.rule == "yaml-alias-bomb" and "levels" in p.message


def test_deeply_nested_node_json_is_a_syntax_problem(tmp_path: Path) -> None:
    text = '{"schema": ' + "[" * 2000 + "]" * 2000 + "}"
    (p,) = problems_of(tmp_path, {"environments/lab/node.json": text})
    assert (p.file, p.rule) == ("environments/lab/node.json", "json-syntax")
    assert "nested too deeply" in p.message


def test_node_json_past_the_limit_points_at_the_place(tmp_path: Path) -> None:
    text = '{"schema":\n  ' + "[" * 100 + "]" * 100 + "}"  # json reads it; still refused
    (p,) = problems_of(tmp_path, {"environments/lab/node.json": text})
    # the object is level 1, the list at column 3 level 2: level MAX_DEPTH + 1 is refused
    assert (p.rule, p.line, p.column) == ("json-syntax", 2, 3 + MAX_DEPTH - 1)
    assert "nested too deeply" in p.message


def test_long_dependency_chain_and_its_cycle(tmp_path: Path) -> None:
    n = 1100
    files: dict[str, str | bytes] = {}
    for i in range(n):
        files.update(service(f"s{i:04d}", f"depends_on: [s{i + 1:04d}]" if i < n - 1 else ""))
    assert problems_of(tmp_path, files) == []
    files.update(service(f"s{n - 1:04d}", "depends_on: [s0000]"))
    (p,) = problems_of(tmp_path / "cycle", files)
    assert (p.rule, p.file) == ("dependency-cycle", f"environments/lab/services/s{n - 1:04d}.yaml")
    assert p.message.startswith("dependency cycle: s0000 → s0001 → ") and p.message.count("→") == n


# -- replaces, characters -------------------------------------------------------------------

PROCESS = "name: new\nkind: process\ncommand: [/bin/true]\nreplaces: old\nplacement:\n"


def test_replaces_a_container_on_another_node_is_refused(tmp_path: Path) -> None:
    files = {**service("old", node="n1"), "environments/lab/services/new.yaml": PROCESS + "  node: n2\n"}
    (p,) = problems_of(tmp_path, files)
    assert (p.file, p.line, p.column, p.rule) == (
        "environments/lab/services/new.yaml",
        4,
        11,
        "replaces-other-node",
    )
    assert "runs on n2" in p.message and "'old' runs on n1" in p.message


def test_replaces_on_the_same_node_or_not_yet_placed_is_fine(tmp_path: Path) -> None:
    same = {**service("old", node="n2"), "environments/lab/services/new.yaml": PROCESS + "  node: n2\n"}
    assert problems_of(tmp_path / "same", same) == []
    unplaced = {  # label-placed, no node.json entry yet: placement decides later
        "environments/lab/services/old.yaml": "name: old\nimage: x:1\nplacement:\n  labels:\n    role: edge\n",
        "environments/lab/services/new.yaml": PROCESS + "  node: n2\n",
    }
    assert problems_of(tmp_path / "unplaced", unplaced) == []
    placed = {
        **unplaced,
        "environments/lab/node.json": json.dumps(
            {"schema": "phrame.placement/v1", "environment": "lab", "assignments": {"old": ["n1"]}}
        ),
    }
    assert [p.rule for p in problems_of(tmp_path / "placed", placed)] == ["replaces-other-node"]


def test_control_character_is_reported_where_it_is(tmp_path: Path) -> None:
    text = b"name: web\nimage: x:1\nplacement:\n  node: n1\ncommand: ab\x07c\n"
    (p,) = problems_of(tmp_path, {"environments/lab/services/web.yaml": text})
    assert (p.rule, p.line, p.column) == ("yaml-syntax", 5, 12)
    assert "U+0007" in p.message
