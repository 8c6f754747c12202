"""``export_node`` gives the same bytes whatever the key order of the payloads it reads: the
topic API exports from the mirror's snapshot, whose JSON has sorted keys, and must answer
what ``phrame export-compose`` prints from a fresh rendering (found by the API's test)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from phrame.compose import export_node
from phrame.config_repo import load_directory, render, validate
from tests.support.sync_support import SAMPLE


def _reversed(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _reversed(value[k]) for k in reversed(list(value))}
    if isinstance(value, list):
        return [_reversed(v) for v in value]
    return value


@pytest.mark.parametrize("node", ["core-01", "edge-01", "edge-02", "edge-03"])
def test_export_does_not_depend_on_the_payloads_key_order(node: str) -> None:
    repo, problems = load_directory(SAMPLE)
    assert validate(repo, problems) == []
    topics = render(repo).topics()
    as_mirrored = json.loads(json.dumps(topics, sort_keys=True))
    expected = export_node(topics, node)
    assert export_node(as_mirrored, node) == expected
    assert export_node(_reversed(topics), node) == expected
