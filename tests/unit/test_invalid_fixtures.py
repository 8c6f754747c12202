"""Every rule and YAML hazard, by its fixture: ``phrame validate`` exits 1 printing the
exact line in ``expected.txt``; the sample repo is valid. The same cases read from a git
commit give the same output as read from disk."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import git
import pytest

from phrame.cli import main

ROOT = Path(__file__).resolve().parents[2]
INVALID = sorted(p for p in (ROOT / "fixtures" / "invalid").iterdir() if p.is_dir())
SAMPLE = ROOT / "fixtures" / "phrame-config"


def test_every_rule_has_a_fixture() -> None:
    rules = {p.name for p in INVALID}
    expected = {
        "yaml-syntax", "yaml-duplicate-key", "yaml-tab", "yaml-encoding", "yaml-alias-bomb",
        "file-too-large", "json-syntax", "name-mismatch", "duplicate-name", "unknown-file",
        "missing-file", "schema", "unknown-node", "cordoned-node", "unknown-network",
        "unknown-dependency", "dependency-cycle", "replaces-unknown", "port-conflict",
        "port-syntax", "capacity-exceeded", "tag-auto-placement", "too-many-ports",
        "replaces-other-node", "payload-too-large", "freeze-cron", "freeze-timezone", "freeze-window",
        "secret-missing", "secret-missing-key", "secret-not-encrypted", "secret-recipient-missing",
        "image-policy",
    }  # fmt: skip
    assert expected <= rules


@pytest.mark.parametrize("case", INVALID, ids=lambda p: p.name)
def test_invalid_case_prints_expected_line(case: Path, capsys: pytest.CaptureFixture[str]) -> None:
    expected = (case / "expected.txt").read_text().strip()
    assert main(["validate", str(case)]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert expected in lines
    assert f": {case.name}: " in expected  # the fixture breaks the rule it is named after


def test_sample_repo_is_valid(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["validate", str(SAMPLE)]) == 0
    assert capsys.readouterr().out == ""


def test_console_script_exit_codes(tmp_path: Path) -> None:
    phrame = [sys.executable, "-m", "phrame"]
    ok = subprocess.run([*phrame, "validate", str(SAMPLE)], capture_output=True, text=True)
    assert ok.returncode == 0, ok.stderr
    bad = subprocess.run([*phrame, "validate", str(INVALID[0])], capture_output=True, text=True)
    assert bad.returncode == 1
    assert "Traceback" not in bad.stderr
    usage = subprocess.run([*phrame, "validate", "--format", "xml", str(SAMPLE)], capture_output=True)
    assert usage.returncode == 2
    missing = subprocess.run([*phrame, "validate", str(tmp_path / "nope")], capture_output=True, text=True)
    assert missing.returncode == 2
    assert "no such directory" in missing.stderr
    not_git = subprocess.run(
        [*phrame, "validate", str(SAMPLE), "--ref", "main"], capture_output=True, text=True
    )
    assert (not_git.returncode, "not a git repository" in not_git.stderr) == (2, True)
    repo = git.Repo.init(tmp_path / "repo")
    repo.index.commit("empty")
    no_ref = subprocess.run(
        [*phrame, "validate", repo.working_dir, "--ref", "nope"], capture_output=True, text=True
    )
    assert no_ref.returncode == 2
    assert "no commit for ref 'nope'" in no_ref.stderr and "Traceback" not in no_ref.stderr


@pytest.mark.parametrize("case", INVALID, ids=lambda p: p.name)
def test_git_commit_reads_like_the_directory(
    case: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    work = tmp_path / "work"
    shutil.copytree(case, work)
    repo = git.Repo.init(work)
    repo.git.add(A=True)
    repo.index.commit("case")
    # the work tree now differs from the commit: --ref must read the commit, not the files
    (work / "nodes").rename(work / "gone")
    main(["validate", str(case)])
    from_dir = capsys.readouterr().out
    assert main(["validate", str(work), "--ref", "HEAD"]) == 1
    assert capsys.readouterr().out == from_dir
