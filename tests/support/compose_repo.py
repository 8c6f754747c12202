"""Helpers for compose import/export tests: a config repo on disk with an inventory, the
files of an import written into it, validated and rendered."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from phrame.compose import ImportResult, import_compose
from phrame.config_repo import Problem, load_directory, render, validate
from schemas import Topics

ROOT = Path(__file__).resolve().parents[2]
COMPOSE_FIXTURES = ROOT / "fixtures" / "compose"
STUDIO = ROOT / "fixtures" / "phrame-config"


def studio_topics() -> dict[str, Any]:
    """The rendered topics of the studio fixture (the examples of docs/config/format.md)."""
    repo, read = load_directory(STUDIO)
    assert not validate(repo, read)
    return render(repo).topics()


def new_repo(path: Path, *nodes: str) -> Path:
    (path / "nodes").mkdir(parents=True, exist_ok=True)
    for n in nodes:
        (path / "nodes" / f"{n}.yaml").write_text(f"name: {n}\n", "utf-8")
    return path


def write(repo: Path, result: ImportResult) -> Path:
    for rel, text in result.files.items():
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_text(text, "utf-8")
    return repo


def problems(repo: Path) -> list[Problem]:
    loaded, read = load_directory(repo)
    return validate(loaded, read)


def topics(repo: Path) -> dict[str, Any]:
    loaded, read = load_directory(repo)
    found = validate(loaded, read)
    assert not found, "\n".join(p.format() for p in found)
    return render(loaded).topics()


def imported(path: Path, text: str, *, env: str = "demo", node: str = "n1") -> tuple[Path, ImportResult]:
    """A fresh repo (node ``node``) holding ``text`` imported as ``env``."""
    result = import_compose(text, env=env, node=node)
    return write(new_repo(path, node), result), result


def node_topics(all_topics: dict[str, Any], node: str) -> dict[str, Any]:
    prefix = f"phrame/desired/nodes/{node}/"
    return {t: p for t, p in all_topics.items() if t.startswith(prefix)}


def container_payload(
    environment: str, service: str, replica: int, **spec: Any
) -> tuple[str, dict[str, Any]]:
    """(topic, payload) of a valid desired container on node n1, ``spec`` overriding fields."""
    item = f"{environment}.{service}.{replica}"
    payload = {
        "kind": "container", "name": item, "environment": environment, "service": service, "replica": replica,
        "image": "busybox:1", "command": None, "entrypoint": None, "env": {}, "ports": [], "volumes": [],
        "networks": [], "resources": {}, "healthcheck": None, "restart": "no", "depends_on": [], "labels": {},
        "digest": "sha256:" + "0" * 64, "commit": "c" * 40, **spec,
    }  # fmt: skip
    return Topics().desired_item("n1", "containers", item), payload
