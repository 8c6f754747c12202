"""``phrame render``: the topic map config-sync publishes, per-node documents, exit codes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from phrame.cli import main
from phrame.config_repo import load_directory, render, validate
from schemas import Topics

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "fixtures" / "phrame-config"


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(["render", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_topics_format_is_the_rendered_topic_map(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, str(SAMPLE), "--format", "topics")
    repo, read = load_directory(SAMPLE)
    validate(repo, read)
    assert code == 0 and json.loads(out) == render(repo).topics()


def test_node_filter_and_prefix(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, str(SAMPLE), "--format", "topics", "--node", "core-01", "--prefix", "site")
    topics = json.loads(out)
    assert code == 0 and topics
    assert all(t.startswith("site/desired/nodes/core-01/") for t in topics)
    assert Topics("site").manifest("core-01") in topics


def test_documents_format_groups_items_and_manifest_per_node(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, str(SAMPLE), "--node", "edge-02")
    doc = json.loads(out)
    assert code == 0 and doc["commit"] == "worktree" and doc["unassigned"] == []
    (node,) = doc["nodes"].values()
    assert set(node["manifest"]["items"]) == set(node["items"])
    assert {"containers/studio-a.mixer.0", "networks/studio-a.media"} <= set(node["items"])


def test_invalid_repo_prints_problems_and_renders_nothing(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, str(ROOT / "fixtures" / "invalid" / "unknown-node"))
    assert (code, out) == (1, "")
    assert "unknown-node" in err and "nothing rendered" in err


def test_unknown_node_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, str(SAMPLE), "--node", "edge-99")
    assert (code, out) == (2, "") and "edge-99" in err
