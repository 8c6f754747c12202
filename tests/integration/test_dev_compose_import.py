"""``phrame dev`` as ``make up`` runs it (no Docker needed here): a compose file POSTed to the
topic API opens a ``phrame-import/...`` branch in ``.phrame-dev/config.git`` that a clone's
``git fetch`` shows, and ``main`` stays where it was. Real mosquitto, git, config-sync,
placement, mirrors and uvicorn."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import git
import httpx
import pytest

from tests.integration.test_dev_cli import clean_env, wait_for
from tests.support.services import free_port, require_binary

ROOT = Path(__file__).parents[2]


@pytest.mark.slow
def test_a_compose_import_on_the_dev_stack_opens_a_branch_git_fetch_shows(tmp_path: Path) -> None:
    require_binary("mosquitto", "mosquitto")
    state, out, api_port = tmp_path / "state", tmp_path / "dev.out", free_port()
    argv = [
        sys.executable, "-m", "phrame", "dev", "--state-dir", str(state), "--api-port", str(api_port),
        "--node-prefix", f"ci{os.getpid()}", "--broker-port", str(free_port()),
        "--listen", f"127.0.0.1:{free_port()}", "--web-port", str(free_port()),
    ]  # fmt: skip
    with open(out, "wb") as sink:
        proc = subprocess.Popen(
            argv,
            stdout=sink,
            stderr=subprocess.STDOUT,
            env=clean_env(DOCKER_HOST=f"unix://{tmp_path}/none.sock"),
        )
    try:
        wait_for(lambda: "ready in" in out.read_text(), "the ready banner", out)
        clone = git.Repo.clone_from(str(state / "config.git"), tmp_path / "clone")
        main = clone.head.commit.hexsha
        token = (state / "api-token").read_text().strip()
        r = httpx.post(
            f"http://127.0.0.1:{api_port}/api/import/compose",
            params={"env": "shop", "node": f"ci{os.getpid()}-1"},
            content=(ROOT / "fixtures/compose/flask-redis.yml").read_bytes(),
            headers={"Authorization": f"Bearer {token}"},
            timeout=60,
        )
        assert r.status_code == 201, r.text + out.read_text()[-3000:]
        branch = r.json()["branch"]
        clone.git.fetch("origin")
        assert f"origin/{branch}" in clone.git.branch("-r")
        assert clone.commit(f"origin/{branch}").parents[0].hexsha == main
        assert clone.commit("origin/main").hexsha == main
        clone.close()
        proc.terminate()
        assert proc.wait(60) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
        subprocess.run(
            [sys.executable, "-m", "phrame", "dev", "--state-dir", str(state), "--down", "--purge"],
            capture_output=True, timeout=120, env=clean_env(),
        )  # fmt: skip
