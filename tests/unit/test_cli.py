"""The ``phrame`` command line: every sub-command is listed, and only the chosen one is imported."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from phrame.cli import COMMANDS, build_parser, main


def test_every_sub_command_configures_and_the_top_level_lists_them_all(
    capsys: pytest.CaptureFixture[str],
) -> None:
    build_parser()  # imports and configures every module: a broken one fails here
    assert main([]) == 2
    err = capsys.readouterr().err
    assert all(name in err for name in COMMANDS)


def test_the_node_agent_starts_on_a_host_without_git() -> None:
    """GitPython refuses to import without a git binary; the agent must not need it."""
    env = dict(os.environ, GIT_PYTHON_GIT_EXECUTABLE="/nonexistent/git")
    env.pop("GIT_PYTHON_REFRESH", None)
    agent = subprocess.run(
        [sys.executable, "-m", "phrame", "node-agent", "--help"], env=env, capture_output=True, text=True
    )
    assert agent.returncode == 0, agent.stderr
    assert "--once" in agent.stdout
    # the control: a sub-command that does need git says so
    placement = subprocess.run(
        [sys.executable, "-m", "phrame", "placement", "--help"], env=env, capture_output=True, text=True
    )
    assert placement.returncode != 0 and "git" in placement.stderr.lower()


def test_rollback_refuses_a_bad_environment_or_commit_before_calling_anyone(
    capsys: pytest.CaptureFixture[str],
) -> None:
    url = "http://127.0.0.1:9"  # nothing is called: a call would fail with "cannot reach"
    assert main(["rollback", "Lab", "--url", url]) == 2
    assert "environment 'Lab' is not a name" in capsys.readouterr().err
    assert main(["rollback", "lab", "--to", "HEAD~1", "--url", url]) == 2
    assert "--to 'HEAD~1' is not a commit sha" in capsys.readouterr().err
