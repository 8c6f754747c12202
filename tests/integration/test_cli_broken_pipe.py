"""A ``phrame`` command whose reader went away (``phrame status --json | head -c 100``) ends
quietly: no BrokenPipeError traceback, no "Exception ignored" at exit."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    ("args", "codes"),
    [(["render", "fixtures/phrame-config"], {1}), (["--help"], {0, 1})],  # argparse's own exit: 0
)
def test_a_closed_pipe_ends_the_command_without_a_traceback(args: list[str], codes: set[int]) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "phrame", *args],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()  # before the command has written anything: every write meets EPIPE
    with proc.stderr:
        err = proc.stderr.read().decode()
    code = proc.wait(60)
    assert "Traceback" not in err and "BrokenPipe" not in err and "Exception ignored" not in err, err
    assert code in codes, err
