"""``phrame import-compose`` and ``phrame export-compose``: files written (never a different
one overwritten without --force), the unsupported list and the validation printed, exit codes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from phrame.cli import main
from tests.support.compose_repo import COMPOSE_FIXTURES, new_repo, node_topics, topics

WORDPRESS = str(COMPOSE_FIXTURES / "wordpress-mysql.yml")


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_import_writes_prints_unsupported_and_validates(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    repo = new_repo(tmp_path, "n1")
    code, out, _ = run(
        capsys, "import-compose", WORDPRESS, "--env", "blog", "--node", "n1", "--repo", str(repo)
    )
    assert code == 0
    assert (
        "wrote environments/blog/services/db.yaml" in out
        and "wrote environments/blog/environment.yaml" in out
    )
    assert "unsupported (1):\n  db: expose:" in out and out.rstrip().endswith("validate: valid")
    assert (repo / "environments/blog/networks/default.yaml").is_file()


def test_import_again_is_unchanged_and_a_changed_file_is_not_overwritten(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    repo = new_repo(tmp_path, "n1")
    args = ("import-compose", WORDPRESS, "--env", "blog", "--node", "n1", "--repo", str(repo))
    assert run(capsys, *args)[0] == 0
    env_file = repo / "environments/blog/environment.yaml"
    env_file.write_text("name: blog\ntrack: release\n", "utf-8")
    db = repo / "environments/blog/services/db.yaml"
    db.write_text(db.read_text() + "replicas: 1\n", "utf-8")
    edited = db.read_text()
    code, out, err = run(capsys, *args)
    assert code == 1 and "environments/blog/services/db.yaml exists and differs" in err and "--force" in err
    assert db.read_text() == edited and "wrote" not in out
    code, out, _ = run(capsys, *args, "--force")
    assert code == 0 and "wrote environments/blog/services/db.yaml" in out
    assert "unchanged environments/blog/services/wordpress.yaml" in out
    # the environment's own settings are kept even with --force
    assert "kept environments/blog/environment.yaml" in out and "track: release" in env_file.read_text()


def test_import_reports_validation_problems(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    repo = new_repo(tmp_path, "n1")
    code, out, _ = run(
        capsys, "import-compose", WORDPRESS, "--env", "blog", "--node", "n9", "--repo", str(repo)
    )
    assert code == 1 and "unknown-node" in out and "validate: 3 problem(s)" in out


def test_import_errors(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    bad = tmp_path / "bad.yml"
    bad.write_text("services:\n  a:\n    image: x\n    image: y\n")
    code, _, err = run(capsys, "import-compose", str(bad), "--env", "blog", "--repo", str(tmp_path))
    assert code == 1 and f"{bad}:4:" in err and "duplicate" in err
    code, _, err = run(capsys, "import-compose", str(tmp_path / "none.yml"), "--env", "blog")
    assert code == 2 and "No such file" in err
    code, _, err = run(capsys, "import-compose", WORDPRESS, "--env", "Blog")
    assert code == 2 and "environment name" in err
    code, _, err = run(capsys, "import-compose", WORDPRESS, "--env", "blog", "--repo", str(tmp_path / "x"))
    assert code == 2 and "no such directory" in err


def test_export_prints_or_writes_the_node(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    repo = new_repo(tmp_path / "repo", "n1")
    run(capsys, "import-compose", WORDPRESS, "--env", "blog", "--node", "n1", "--repo", str(repo))
    code, out, _ = run(capsys, "export-compose", "--node", "n1", "--repo", str(repo))
    assert code == 0 and "wordpress:" in out and "x-phrame:" in out
    target = tmp_path / "n1.yml"
    code, printed, _ = run(
        capsys, "export-compose", "--node", "n1", "--repo", str(repo), "--out", str(target)
    )
    assert code == 0 and printed == "" and target.read_text() == out
    # the same as exporting the topics phrame render prints
    code, rendered, _ = run(capsys, "render", str(repo), "--format", "topics")
    assert node_topics(json.loads(rendered), "n1") == node_topics(topics(repo), "n1")


def test_export_errors(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    repo = new_repo(tmp_path, "n1")
    code, _, err = run(capsys, "export-compose", "--node", "n7", "--repo", str(repo))
    assert code == 2 and "'n7' is not in nodes/" in err
    (repo / "environments/x/services").mkdir(parents=True)
    (repo / "environments/x/services/a.yaml").write_text("name: a\nimage: busybox\n")
    code, _, err = run(capsys, "export-compose", "--node", "n1", "--repo", str(repo))
    assert code == 1 and "missing-file" in err and "nothing exported" in err


def test_import_reads_standard_input(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    import io

    repo = new_repo(tmp_path, "n1")
    monkeypatch.setattr("sys.stdin", io.StringIO("services:\n  cache:\n    image: redis:7\n"))
    code, out, _ = run(capsys, "import-compose", "-", "--env", "blog", "--node", "n1", "--repo", str(repo))
    assert code == 0 and "wrote environments/blog/services/cache.yaml" in out and "unsupported: none" in out
