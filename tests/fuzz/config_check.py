"""The property every config-file fuzz test checks, on a repository written to a temp dir.

``phrame validate``'s library entry point (``load_directory`` + ``validate``) returns
problems or valid and never raises; each problem names a file, a line and column from 1,
a rule docs/cli.md documents, and encodes as UTF-8 JSON (config-sync publishes it). What
validates renders to canonical JSON. Placement's reading of the same repository (what its
reconciler calls before deciding) raises nothing but ``PlacementError``.
"""

from __future__ import annotations

import re
import tempfile
from pathlib import Path

from hypothesis import event
from hypothesis.control import currently_in_test_context

from phrame.config_repo import ConfigRepo, Problem, load_directory, render, validate
from phrame.placement_rules import inventory
from phrame.placement_rules.decide import decide
from phrame.placement_rules.models import NodeHealth
from placement.errors import PlacementError
from placement.reconcile import unreadable_inputs
from schemas import canonical_json

CLI_PAGE = Path(__file__).resolve().parents[2] / "docs" / "cli.md"


def documented_rules() -> frozenset[str]:
    """The rule names of the docs' table under ``phrame validate`` (the contract)."""
    text = CLI_PAGE.read_text("utf-8")
    table = text.split("| rule | what it refuses |", 1)[1].split("\n\n", 1)[0]
    rows = [line.split("|")[1] for line in table.splitlines() if line.startswith("| `")]
    return frozenset(name for row in rows for name in re.findall(r"`([a-z-]+)`", row))


RULES = documented_rules()


def write(root: Path, files: dict[str, bytes | str]) -> None:
    for name, data in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data if isinstance(data, bytes) else data.encode("utf-8"))


def check_problem(p: Problem, files: set[str]) -> None:
    assert p.file and (p.file in files or p.file.split("/")[0] in ("nodes", "environments")), p
    assert p.line >= 1 and p.column >= 1, p
    assert p.rule in RULES, f"undocumented rule {p.rule!r}: {p.format()}"
    p.format().encode("utf-8")
    canonical_json(p.to_dict())


def placement_reads(repo: ConfigRepo) -> None:
    """What placement's reconciler reads of each environment before it decides."""
    for name in sorted(repo.environments):
        env = repo.environments[name]
        try:
            inventory.mode_and_track(env, "refs/heads/main")
            if env.doc is None or unreadable_inputs(repo, name):
                continue  # the reconciler raises InvalidInputs / NotOnTrackedRef here
            nodes = inventory.nodes_of(repo)
            decide(
                name,
                nodes=nodes,
                services=inventory.services_of(env),
                current=inventory.current_document(env),
                health={n: NodeHealth(alive=True) for n in nodes},
                now=1000.0,
                reschedule_after=60.0,
                reserved=inventory.reserved_elsewhere(repo, name),
            )
        except PlacementError:
            pass  # the documented error: logged per environment, the loop goes on


def check_repo(files: dict[str, bytes | str]) -> list[Problem]:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        write(root, files)
        repo, read = load_directory(root)
        problems = validate(repo, read)
    for p in problems:
        check_problem(p, set(files))
    if not problems:
        for payload in render(repo).topics().values():
            canonical_json(payload)
    placement_reads(repo)
    if currently_in_test_context():  # --hypothesis-show-statistics: how deep the inputs get
        event("valid" if not problems else f"first rule: {problems[0].rule}")
    return problems
