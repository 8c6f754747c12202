"""A placement pass parses only the files that changed since the last pass.

Placement re-reads the tracked head every ``PHRAME_PLACEMENT_INTERVAL_S`` (10 s). At 1,000
nodes, parsing every file of the commit twice a pass (the default ref, then the tracked
one) cost 1.6-2.5 s of CPU per pass, up to a quarter of a core by itself (``benchmarks/fleet_scale.py``).
Real bare git remote; the YAML and JSON parsers are counted, not replaced.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import phrame.config_repo.loader
import placement.reconcile
from tests.integration.test_placement_git import Clock, ConfigRemote, beat, make


@pytest.fixture
def parsed(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The paths placement parses (YAML and JSON), in order."""
    seen: list[str] = []

    def counting(real: Callable[..., Any]) -> Callable[..., Any]:
        def parse(path: str, raw: bytes) -> Any:
            seen.append(path)
            return real(path, raw)

        return parse

    monkeypatch.setattr(
        phrame.config_repo.loader, "parse_yaml", counting(phrame.config_repo.loader.parse_yaml)
    )
    monkeypatch.setattr(
        phrame.config_repo.loader, "parse_json", counting(phrame.config_repo.loader.parse_json)
    )
    return seen


def test_a_pass_on_an_unchanged_head_parses_no_file_and_a_change_parses_one(
    tmp_path: Path, parsed: list[str]
) -> None:
    remote = ConfigRemote(tmp_path, keep_node_json=True)
    clock = Clock()
    rec = make(tmp_path, remote, clock)
    first = rec.run_pass()
    assert first[0].error is None and parsed, "the first pass reads the repository"
    files = len(set(parsed))
    assert len(parsed) == files, f"the first pass parsed files twice: {sorted(parsed)}"

    parsed.clear()
    clock.now += 5
    beat(rec.liveness, clock)
    again = rec.run_pass()
    assert again[0].error is None and again[0].commit is None
    assert parsed == [], f"an unchanged head was parsed again: {len(parsed)} of {files} files"

    path = "environments/studio-a/services/mixer.yaml"
    text = (remote.work / path).read_text().replace("replicas: 2", "replicas: 3")
    assert "replicas: 3" in text
    remote.change(path, text, "mixer: 3 replicas")
    clock.now += 5
    beat(rec.liveness, clock)
    changed = rec.run_pass()
    assert changed[0].error is None and changed[0].commit is not None  # the new replica was placed
    assert parsed == [path], f"expected only {path} parsed, got {parsed}"
    assert len(remote.node_json()["assignments"]["mixer"]) == 3


def test_a_commit_is_read_and_validated_once_however_many_passes_read_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    remote = ConfigRemote(tmp_path, keep_node_json=True)
    validated: list[str | None] = []
    real = placement.reconcile.validate

    def counting(repo: Any, problems: Any = None, **kw: Any) -> Any:
        validated.append(repo.commit)
        return real(repo, problems, **kw)

    monkeypatch.setattr(placement.reconcile, "validate", counting)
    clock = Clock()
    rec = make(tmp_path, remote, clock)
    for _ in range(3):
        assert rec.run_pass()[0].error is None
        clock.now += 5
        beat(rec.liveness, clock)
    assert validated == [remote.head()], f"validated {len(validated)} times: {validated}"
