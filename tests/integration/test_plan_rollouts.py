"""``phrame plan`` on a real git repository lists a staged rollout's waves, as the MR note does."""

from __future__ import annotations

from pathlib import Path

import pytest

from phrame.cli import main as phrame_main
from tests.support.sync_support import ConfigRemote


def test_plan_lists_the_waves_of_a_service_with_update(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    remote = ConfigRemote.with_sample(tmp_path)
    mixer = remote.work_path / "environments/studio-a/services/mixer.yaml"
    text = mixer.read_text()
    assert "replicas: 2" in text
    update = "update:\n  max_parallel: 1\n  canary: 1\n  min_healthy_s: 5\n"
    remote.commit(
        "mixer rolls out in waves", files={mixer.relative_to(remote.work_path).as_posix(): text + update}
    )
    mixer.write_text(text.replace("image: ", "image: changed.test/", 1) + update)
    assert phrame_main(["plan", str(remote.work_path)]) == 0
    out = capsys.readouterr().out
    assert "#### Staged rollouts" in out
    line = next(x for x in out.splitlines() if x.startswith("- `studio-a/mixer`"))
    assert "2 replica(s) in 2 wave(s), each healthy for 5 s" in line
    assert (
        "1) `studio-a.mixer.0` (canary; then `phrame promote studio-a mixer`) 2) `studio-a.mixer.1`" in line
    )
    # adding update: alone changes no item: no waves, nothing to change
    mixer.write_text(text + update)
    assert phrame_main(["plan", str(remote.work_path)]) == 0
    out = capsys.readouterr().out
    assert "Staged rollouts" not in out and "No changes to any node." in out
