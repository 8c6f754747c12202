"""The site files of ``compose/`` as a person copies them (``.env`` and
``docker-compose.override.yml`` from their examples), read by the real ``docker-compose``:
run in the folder with no ``-f``, it loads both; given ``-f``, it loads no override (why the
production guide says to run it without). ``docker-compose config`` only: no daemon needed.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from ruamel.yaml import YAML

from tests.support.services import require_binary

COMPOSE = Path(__file__).resolve().parents[2] / "compose"
REPO_MOUNT = "/srv/phrame-config.git"


def site_folder(tmp_path: Path) -> Path:
    folder = tmp_path / "compose"
    folder.mkdir()
    for name in ("docker-compose.yml", "docker-compose.override.example.yml", ".env.example"):
        shutil.copy(COMPOSE / name, folder / name)
    shutil.copy(folder / ".env.example", folder / ".env")
    shutil.copy(folder / "docker-compose.override.example.yml", folder / "docker-compose.override.yml")
    return folder


def config(folder: Path, *args: str) -> dict:
    binary = require_binary("docker-compose", "docker-compose")
    done = subprocess.run([binary, *args, "config"], cwd=folder, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return YAML(typ="safe").load(done.stdout)


def mounts(doc: dict, service: str) -> list[str]:
    return [
        str(v) if isinstance(v, str) else f"{v['source']}:{v['target']}"
        for v in doc["services"][service].get("volumes", [])
    ]


def test_in_its_folder_with_no_f_the_env_and_the_override_apply(tmp_path: Path) -> None:
    doc = config(site_folder(tmp_path))
    for service in ("config-sync", "placement"):
        assert any(m.startswith(f"{REPO_MOUNT}:{REPO_MOUNT}") for m in mounts(doc, service)), mounts(
            doc, service
        )
        env = doc["services"][service]["environment"]
        assert env["PHRAME_GIT_HOST"] == "local" and env["PHRAME_REPO_URL"] == REPO_MOUNT
    assert doc["services"]["config-sync"]["environment"]["PHRAME_POLL_S"] == "10"
    assert doc["services"]["mosquitto"]["image"] == "phrame/mosquitto:local"


def test_given_f_the_override_is_not_loaded(tmp_path: Path) -> None:
    doc = config(site_folder(tmp_path), "-f", "docker-compose.yml")
    assert not any(REPO_MOUNT in m for m in mounts(doc, "config-sync"))
