"""The ``update:`` block: its schema and rules (with file:line), the merge with the
environment's default, and that it never reaches a rendered item (no restart for adding it)."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from phrame.config_repo import Problem, load_directory, render, validate
from phrame.config_repo.update_policy import UpdatePolicy, policies

SAMPLE = Path(__file__).resolve().parents[2] / "fixtures" / "phrame-config"
EGRESS = "environments/studio-a/services/egress.yaml"
ENV = "environments/studio-a/environment.yaml"


def _repo(tmp_path: Path, files: dict[str, str]) -> Path:
    root = Path(tempfile.mkdtemp(dir=tmp_path)) / "repo"
    shutil.copytree(SAMPLE, root)
    for name, text in files.items():
        (root / name).write_text(text)
    return root


def _problems(tmp_path: Path, files: dict[str, str]) -> list[Problem]:
    repo, read = load_directory(_repo(tmp_path, files))
    return validate(repo, read)


def _with_update(block: str) -> dict[str, str]:
    text = (SAMPLE / EGRESS).read_text()
    return {EGRESS: text + "update:\n" + block}


def test_max_parallel_below_one_is_a_schema_error_at_its_line(tmp_path: Path) -> None:
    files = _with_update("  max_parallel: 0\n")
    lines = files[EGRESS].splitlines()
    (p,) = _problems(tmp_path, files)
    assert (p.file, p.rule, p.path) == (EGRESS, "schema", "/update/max_parallel")
    assert p.line == len(lines)  # the last line: max_parallel's own


def test_unknown_key_and_bad_on_failure_are_refused(tmp_path: Path) -> None:
    found = _problems(tmp_path, _with_update("  on_failure: retry\n  max_paralel: 2\n"))
    assert {p.path for p in found} == {"/update/on_failure", "/update/max_paralel"}
    assert all(p.rule == "schema" for p in found)


def test_more_canaries_than_replicas(tmp_path: Path) -> None:
    (p,) = _problems(tmp_path, _with_update("  canary: 5\n"))
    assert (p.rule, p.path) == ("update-canary", "/update/canary")
    assert "canary 5" in p.message and "replica" in p.message


def test_canary_from_the_environment_default_points_at_the_default(tmp_path: Path) -> None:
    env = (SAMPLE / ENV).read_text()
    assert "defaults:" in env
    env = env.replace("defaults:\n", "defaults:\n  update:\n    canary: 9\n", 1)
    found = _problems(tmp_path, {ENV: env})
    assert found and {(p.file, p.rule, p.path) for p in found} == {
        (ENV, "update-canary", "/defaults/update/canary")
    }
    assert all("from the environment's defaults" in p.message for p in found)


def test_deadline_not_above_min_healthy(tmp_path: Path) -> None:
    (p,) = _problems(tmp_path, _with_update("  min_healthy_s: 30\n  healthy_deadline_s: 30\n"))
    assert (p.rule, p.path) == ("update-deadline", "/update/healthy_deadline_s")


def test_service_keys_win_over_the_default_key_by_key(tmp_path: Path) -> None:
    env = (
        (SAMPLE / ENV)
        .read_text()
        .replace("defaults:\n", "defaults:\n  update:\n    max_parallel: 2\n    on_failure: rollback\n", 1)
    )
    files = {ENV: env, **_with_update("  max_parallel: 1\n")}
    repo, read = load_directory(_repo(tmp_path, files))
    assert validate(repo, read) == []
    found = policies(repo)
    assert found[("studio-a", "egress")] == UpdatePolicy(max_parallel=1, on_failure="rollback")
    # every container service of the environment takes the default; processes do not
    others = {k: v for k, v in found.items() if k != ("studio-a", "egress")}
    assert others and all(v == UpdatePolicy(max_parallel=2, on_failure="rollback") for v in others.values())
    kinds = {
        name: doc.data.get("kind", "container")
        for name, doc in repo.environments["studio-a"].services.items()
    }
    assert all(kinds[svc] == "container" for (_env, svc) in found)


def test_update_is_not_part_of_any_rendered_item(tmp_path: Path) -> None:
    before, read = load_directory(_repo(tmp_path, {}))
    assert validate(before, read) == []
    after, read = load_directory(_repo(tmp_path, _with_update("  max_parallel: 1\n  canary: 1\n")))
    assert validate(after, read) == []
    old, new = render(before, commit="a" * 40).topics(), render(after, commit="a" * 40).topics()
    items = [t for t in old if "/desired/nodes/" in t]
    assert items and all(old[t] == new[t] for t in items)  # same digests: nothing restarts
    assert policies(before) == {}


def test_wave_sizes() -> None:
    assert UpdatePolicy().wave_count(4) == 1
    assert UpdatePolicy(max_parallel=1).wave_count(4) == 4
    assert UpdatePolicy(max_parallel=2, canary=1).wave_count(4) == 3  # 1, 2, 1
    p = UpdatePolicy(max_parallel=3, canary=1)
    assert [p.wave_size(True, 4), p.wave_size(False, 3)] == [1, 3]
