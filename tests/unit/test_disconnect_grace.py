"""The environment's ``disconnect:`` block: its schema (with file:line) and the wait it gives
placement (``inventory.reschedule_after``) in place of ``PHRAME_RESCHEDULE_AFTER_S``."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from phrame.config_repo import Problem, load_directory, validate
from phrame.placement_rules import inventory

SAMPLE = Path(__file__).resolve().parents[2] / "fixtures" / "phrame-config"
ENV = "environments/studio-a/environment.yaml"


def _load(tmp_path: Path, block: str):
    root = Path(tempfile.mkdtemp(dir=tmp_path)) / "repo"
    shutil.copytree(SAMPLE, root)
    text = (SAMPLE / ENV).read_text().rstrip("\n") + "\n" + block
    (root / ENV).write_text(text)
    repo, read = load_directory(root)
    return repo, validate(repo, read), text


def test_the_environments_grace_replaces_the_default(tmp_path: Path) -> None:
    repo, problems, _ = _load(tmp_path, "disconnect:\n  grace_s: 900\n")
    assert problems == []
    assert inventory.reschedule_after(repo.environments["studio-a"], 60.0) == 900.0
    zero, problems, _ = _load(tmp_path, "disconnect:\n  grace_s: 0\n")
    assert problems == [] and inventory.reschedule_after(zero.environments["studio-a"], 60.0) == 0.0


def test_without_a_disconnect_block_the_default_applies(tmp_path: Path) -> None:
    repo, problems, _ = _load(tmp_path, "")
    assert problems == []
    assert inventory.reschedule_after(repo.environments["studio-a"], 60.0) == 60.0


def test_a_negative_grace_is_a_schema_error_at_its_line(tmp_path: Path) -> None:
    _, problems, text = _load(tmp_path, "disconnect:\n  grace_s: -5\n")
    (p,) = problems
    assert isinstance(p, Problem)
    assert (p.file, p.rule, p.path) == (ENV, "schema", "/disconnect/grace_s")
    assert p.line == len(text.splitlines())


def test_an_unknown_key_and_a_missing_grace_are_refused(tmp_path: Path) -> None:
    _, problems, _ = _load(tmp_path, "disconnect:\n  after: 5m\n")
    assert {p.rule for p in problems} == {"schema"}
    assert any(p.path.startswith("/disconnect") for p in problems)
