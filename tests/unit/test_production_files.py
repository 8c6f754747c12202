"""The files of the production form (``scripts/build-image``, ``compose/``), checked as text.

No Docker here: tests/integration/test_compose_stack.py runs the stack; these catch the
drift a rename leaves behind (a package the image's rebuild check does not hash).
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def build_inputs() -> list[str]:
    found = re.search(r"^inputs=\(([^)]*)\)", (ROOT / "scripts" / "build-image").read_text(), re.M)
    assert found, "scripts/build-image has no inputs=(...) line"
    return found.group(1).split()


def test_the_image_is_rebuilt_when_any_packaged_file_changes() -> None:
    """Every package pyproject.toml ships is hashed into the image's input label, and every
    input exists (a renamed package silently left the image stale)."""
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    packages = {p.rstrip("*") for p in pyproject["tool"]["setuptools"]["packages"]["find"]["include"]}
    inputs = build_inputs()
    assert packages <= set(inputs), f"not hashed by scripts/build-image: {sorted(packages - set(inputs))}"
    assert [i for i in inputs if not (ROOT / i).exists()] == []


def test_the_env_example_names_every_variable_the_compose_files_read() -> None:
    compose = ROOT / "compose"
    used = set()
    for name in ("docker-compose.yml", "docker-compose.override.example.yml"):
        used |= set(re.findall(r"\$\{(PHRAME_[A-Z0-9_]+)", (compose / name).read_text()))
    example = (compose / ".env.example").read_text()
    named = set(re.findall(r"^#?(PHRAME_[A-Z0-9_]+)=", example, re.M))
    assert used - named == set(), "add these to compose/.env.example"
    assert named - used == set(), "compose/.env.example names settings no compose file reads"
    assert re.search(r"^COMPOSE_PROJECT_NAME=\S+$", example, re.M)
