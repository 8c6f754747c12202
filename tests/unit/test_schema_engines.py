"""The two schema engines agree: jsonschema_rs is trusted only to say "valid", so whatever
it calls valid the Python validator must call valid too, over real and mutated documents.
And every ``$ref`` is resolved once, when the validator is built."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from phrame.config_repo.validate import schema_name
from phrame.config_repo.yaml_reading import parse_json, parse_yaml
from schemas.registry import SCHEMA_NAMES, inlined, surely_valid, validator

ROOT = Path(__file__).resolve().parents[2]
VARIANTS: list[Any] = [
    1,
    -1,
    0,
    1.5,
    True,
    False,
    None,
    "",
    "x",
    "yes",
    "a" * 300,
    "1.2.3.4/99",
    [],
    {},
    ["x"],
    {"x": 1},
]


def _kind(path: Path) -> str | None:
    parts = path.parts
    if "nodes" in parts:
        return "node"
    if path.name == "node.json":
        return "placement"
    if path.name in ("environment.yaml", "environment.yml"):
        return "environment"
    for folder, kind in (("networks", "network"), ("services", "service")):
        if folder in parts:
            return kind
    return None


def _documents() -> list[tuple[str, Any]]:
    found: list[tuple[str, Any]] = []
    for path in sorted(ROOT.joinpath("fixtures").rglob("*")):
        kind = _kind(path)
        if kind is None or path.suffix not in (".yaml", ".yml", ".json") or not path.is_file():
            continue
        doc, _ = (parse_json if path.suffix == ".json" else parse_yaml)(str(path), path.read_bytes())
        # the richest few of each schema: enough keys to mutate, and a test that stays fast
        if doc is not None:
            found.append((schema_name(kind, doc), doc.data))
    found.sort(key=lambda item: -len(json.dumps(item[1])))
    per_schema: dict[str, int] = {}
    return [
        (n, d)
        for n, d in found
        if per_schema.setdefault(n, 0) < 2 and not per_schema.update({n: per_schema[n] + 1})
    ]


# formats jsonschema checks on values that are no strings (jsonschema_rs would not)
EXTRA = [
    (
        "service-container",
        {"name": "w", "image": "x:1", "placement": {"node": "n1"}, "ulimits": {"nofile": u}},
    )
    for u in ({"soft": 2048, "hard": 1024}, {"soft": 1, "hard": 2}, 5, -1)
]


def _mutations(data: Any) -> list[Any]:
    if not isinstance(data, dict):
        return [data]
    out = [data]
    for key, value in data.items():
        out += [{**data, key: v} for v in VARIANTS]
        if isinstance(value, dict):
            out += [{**data, key: {**value, k: v}} for k in value for v in VARIANTS[:8]]
    return out


def test_what_the_fast_engine_calls_valid_python_calls_valid() -> None:
    checked = disagreements = 0
    for name, data in _documents() + EXTRA:
        for doc in _mutations(data):
            python_valid = validator(name).is_valid(json.loads(json.dumps(doc)))
            fast_valid = surely_valid(name, doc)
            assert python_valid or not fast_valid, (name, doc)
            checked += 1
            disagreements += python_valid != fast_valid
    assert checked > 800, checked  # the corpus is real: fixtures times their mutations
    assert disagreements < checked // 100, disagreements  # and the fast one mostly decides


@pytest.mark.parametrize("name", SCHEMA_NAMES)
def test_every_ref_is_resolved_when_the_validator_is_built(name: str) -> None:
    assert '"$ref"' not in json.dumps(inlined(name))
    assert validator(name) is validator(name)  # one per schema per process
