"""Round trip: a compose file imported, rendered, exported and imported again renders the
same desired state (every node topic, digests included); and a phrame node exported and
imported back renders the same containers and networks."""

from __future__ import annotations

from pathlib import Path

import pytest

from phrame.compose import export_node, import_compose
from tests.support.compose_repo import (
    COMPOSE_FIXTURES,
    imported,
    new_repo,
    node_topics,
    studio_topics,
    topics,
    write,
)

FIXTURES = sorted(p.stem for p in COMPOSE_FIXTURES.glob("*.yml"))


@pytest.mark.parametrize("name", FIXTURES)
def test_import_export_import_renders_the_same_desired_state(tmp_path: Path, name: str) -> None:
    first_repo, _ = imported(tmp_path / "first", (COMPOSE_FIXTURES / f"{name}.yml").read_text("utf-8"))
    first = topics(first_repo)
    exported = export_node(first, "n1")
    second_repo, again = imported(tmp_path / "second", exported)
    second = topics(second_repo)
    # the node's items and manifest, byte for byte (so digests: the agent would change nothing)
    assert node_topics(second, "n1") == node_topics(first, "n1")
    assert node_topics(first, "n1")  # not vacuous: the sample runs something
    # the services as declared may differ in form only (a command string becomes a list)
    assert {t for t in first if "/services/" in t} == {t for t in second if "/services/" in t}
    # what the export writes, the import reads without loss
    assert again.unsupported == []
    assert export_node(second, "n1") == exported


def test_a_phrame_node_exported_and_imported_back_runs_the_same_containers(tmp_path: Path) -> None:
    original = studio_topics()
    text = export_node(original, "edge-01")
    result = import_compose(text, env="studio-a", node="edge-01")
    assert result.unsupported == []
    repo = write(new_repo(tmp_path, "edge-01"), result)
    again = topics(repo)

    def items(t: dict) -> dict:
        return {
            k: v for k, v in node_topics(t, "edge-01").items() if "/containers/" in k or "/networks/" in k
        }

    assert items(again) == items(original) and items(original)
