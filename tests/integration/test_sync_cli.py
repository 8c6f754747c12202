"""``phrame plan`` on a real git repository: the MR plan for a ref or the files on disk."""

from __future__ import annotations

from pathlib import Path

import pytest

from phrame.cli import main as phrame_main
from tests.support.sync_support import ConfigRemote

SERVICE = "name: asset-cache\nimage: registry.studio.test/cache:1\nplacement:\n  node: core-01\n"


@pytest.fixture
def remote(tmp_path: Path) -> ConfigRemote:
    return ConfigRemote.with_sample(tmp_path)


def test_plan_of_the_files_on_disk(remote: ConfigRemote, capsys: pytest.CaptureFixture[str]) -> None:
    (remote.work_path / "environments/studio-a/services/asset-cache.yaml").write_text(SERVICE)
    (remote.work_path / "environments/studio-a/services/egress.yaml").unlink()
    mixer = remote.work_path / "environments/studio-a/services/mixer.yaml"
    mixer.write_text(mixer.read_text().replace("image: ", "image: changed.test/", 1))
    assert phrame_main(["plan", str(remote.work_path)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("<!-- phrame:plan -->")
    assert "| add | container | `studio-a.asset-cache.0` |" in out
    assert "| remove | container | `studio-a.egress.0` |" in out
    assert "| change | container | `studio-a.mixer.0` | `image` |" in out


def test_plan_shows_where_placement_would_put_a_new_replica(
    remote: ConfigRemote, capsys: pytest.CaptureFixture[str]
) -> None:
    """``replicas: 2 → 3`` of a label-placed service renders nothing for the third replica
    until placement commits node.json; the plan shows the node placement would choose now."""
    mixer = remote.work_path / "environments/studio-a/services/mixer.yaml"
    mixer.write_text(mixer.read_text().replace("replicas: 2", "replicas: 3"))
    assert phrame_main(["plan", str(remote.work_path)]) == 0
    out = capsys.readouterr().out
    assert "No changes to any node." in out  # nothing renders for mixer.2 yet
    assert "#### Placement preview" in out and "every node assumed online" in out
    assert "| studio-a | `mixer.2` | — | edge-01 | new replica |" in out


def test_plan_between_refs_and_of_an_invalid_ref(
    remote: ConfigRemote, capsys: pytest.CaptureFixture[str]
) -> None:
    remote.commit(
        "add", branch="feature/x", files={"environments/studio-a/services/asset-cache.yaml": SERVICE}
    )
    assert phrame_main(["plan", str(remote.bare_path), "--to", "feature/x"]) == 0
    out = capsys.readouterr().out
    assert "1 to add, 0 to change, 0 to remove" in out
    assert phrame_main(["plan", str(remote.bare_path), "--to", "main"]) == 0
    assert "No changes to any node." in capsys.readouterr().out
    remote.commit("break", branch="feature/y", files={"nodes/core-01.yaml": "name: core-01\nbogus: 1\n"})
    assert phrame_main(["plan", str(remote.bare_path), "--to", "feature/y"]) == 1
    assert "this commit will not be deployed" in capsys.readouterr().out
    assert phrame_main(["plan", str(remote.bare_path), "--from", "nope"]) == 2


def test_plan_of_a_branch_behind_main_is_against_the_merge_base(
    remote: ConfigRemote, capsys: pytest.CaptureFixture[str]
) -> None:
    remote.work.git.checkout("-B", "feature/x", "origin/main")
    remote.commit(
        "add", branch="feature/x", files={"environments/studio-a/services/asset-cache.yaml": SERVICE}
    )
    remote.work.git.checkout("-B", "main", "origin/main")  # main moves on without it
    probe = SERVICE.replace("asset-cache", "probe")
    remote.commit("add probe", branch="main", files={"environments/studio-a/services/probe.yaml": probe})
    assert phrame_main(["plan", str(remote.bare_path), "--to", "feature/x"]) == 0
    out = capsys.readouterr().out
    assert "1 to add, 0 to change, 0 to remove" in out and "probe" not in out
