"""The rules and the rendering per environment, kept across commits: an environment whose
files and the inventory are the blobs checked before is not checked nor rendered again,
and what spans environments (host ports, capacity per node) and what the inventory
changes are still found."""

from __future__ import annotations

import shutil
from pathlib import Path

import git

from phrame.config_repo import ReadCache, render, validate
from phrame.config_repo.keys import environment_key, inventory_key
from phrame.config_repo.update_policy import policies
from schemas import canonical_json
from tests.support.readings import commit_and_read

SAMPLE = Path(__file__).resolve().parents[2] / "fixtures" / "phrame-config"
STUDIO_B = {
    "environments/studio-b/environment.yaml": "name: studio-b\ntrack: main\nplacement: review\n",
    "environments/studio-b/services/recorder.yaml": (
        "name: recorder\nimage: registry.studio.test/media/recorder:1.0\n"
        'ports:\n  - "127.0.0.1:7000:7000"\nresources:\n  cpus: 2\n  memory: 4Gi\n'
        "placement:\n  node: core-01\n"
    ),
}


def _write(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)


def _sample(tmp_path: Path, more: dict[str, str]) -> tuple[Path, git.Repo]:
    root = tmp_path / "repo"
    shutil.copytree(SAMPLE, root)
    _write(root, more)
    return root, git.Repo.init(root)


def _edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text, (path, old)
    path.write_text(text.replace(old, new, 1))


def _ptp_legacy_as_a_process(env: Path) -> None:
    legacy = env / "services/ptp-monitor-legacy.yaml"
    text = legacy.read_text().replace(
        "image: registry.studio.test/infra/ptp-monitor:0.9.2", "kind: process\ncommand: [ptp]"
    )
    legacy.write_text(
        text.replace('ports:\n  - "127.0.0.1:9300:9300"\n', "").replace("networks:\n  - control\n", "")
    )


def test_rules_kept_per_environment_equal_a_fresh_check_over_a_series_of_commits(tmp_path: Path) -> None:
    root, repo = _sample(tmp_path, STUDIO_B)
    a, b = root / "environments/studio-a", root / "environments/studio-b"
    originals = {p: p.read_text() for p in root.rglob("*.yaml") if ".git" not in p.parts}

    def restore() -> None:
        for p, text in originals.items():
            p.write_text(text)

    # (change, the rule expected to fail, or None)
    changes = [
        (lambda: None, None),
        (lambda: _edit(a / "services/mixer.yaml", "mixer:3.1.0", "mixer:3.2.0"), None),
        # studio-a takes a host port studio-b's recorder holds on core-01: studio-b unchanged
        (
            lambda: _edit(a / "services/tams.yaml", '"127.0.0.1:8000:8000"', '"127.0.0.1:7000:8000"'),
            "port-conflict",
        ),
        (restore, None),
        # the inventory changes under studio-b's unchanged files: its pin is now cordoned
        (
            lambda: _edit(root / "nodes/core-01.yaml", "name: core-01", "name: core-01\ncordoned: true"),
            "cordoned-node",
        ),
        (restore, None),
        # studio-b alone outgrows core-01 beside studio-a's unchanged services
        (lambda: _edit(b / "services/recorder.yaml", "cpus: 2", "cpus: 12"), "capacity-exceeded"),
        (restore, None),
        (lambda: _edit(b / "services/recorder.yaml", "recorder:1.0", "recorder:1.1"), None),
        # what unchanged service files name goes away or changes beside them
        (lambda: (a / "networks/control.yaml").unlink(), "unknown-network"),
        (restore, None),
        (lambda: (a / "services/input-proc.yaml").unlink(), "unknown-dependency"),  # mixer's
        (restore, None),
        # ptp-monitor replaces it (a process's fields besides: a schema problem of its own)
        (lambda: _ptp_legacy_as_a_process(a), "replaces-unknown schema"),
        (restore, None),
        (
            lambda: _edit(a / "environment.yaml", "defaults:", "defaults:\n  update: {canary: 2}"),
            "update-canary",
        ),
        (restore, None),
    ]
    cache = ReadCache()
    for i, (change, rule) in enumerate(changes):
        change()
        sha, (cached, read_cached), (fresh, read_fresh) = commit_and_read(repo, f"commit {i}", cache)
        problems = validate(cached, read_cached, cache=cache)
        assert problems == validate(fresh, read_fresh), i
        assert policies(cached, cache) == policies(fresh), i  # the rollouts' update policies
        assert sorted({p.rule for p in problems}) == (rule.split() if rule else []), (i, problems)
        if problems:
            continue
        kept, made = render(cached, commit=sha), render(fresh, commit=sha)
        assert kept.topics() == made.topics() and kept.unassigned == made.unassigned, i
        for (node, key), size in kept.sizes.items():  # what the payload check measures
            assert size == len(canonical_json(kept.nodes[node].items[key])), (i, node, key)


def test_an_environment_unchanged_since_a_check_is_not_checked_again(tmp_path: Path) -> None:
    root, repo = _sample(tmp_path, STUDIO_B)
    cache = ReadCache()

    def check(message: str) -> tuple[object, ...]:
        _sha, (loaded, read), _fresh = commit_and_read(repo, message, cache)
        assert validate(loaded, read, cache=cache) == []  # and rendered, for the payload sizes
        nodes = inventory_key(loaded)
        return tuple(
            cache.get((kept, nodes, environment_key(loaded.environments[env])), large=True)
            for kept in ("environment-rules", "environment-items")
            for env in ("studio-a", "studio-b")
        )

    first = check("one")
    assert all(made is not None for made in first)
    _edit(root / "environments/studio-a/services/mixer.yaml", "mixer:3.1.0", "mixer:3.2.0")
    rules_a, rules_b, items_a, items_b = check("two")
    # studio-b's check and rendering of the first commit, not new ones
    assert rules_b is first[1] and items_b is first[3]
    assert None not in (rules_a, items_a) and rules_a is not first[0] and items_a is not first[2]


def test_an_environment_folder_of_the_same_blobs_is_loaded_once(tmp_path: Path) -> None:
    root, repo = _sample(tmp_path, STUDIO_B)
    cache = ReadCache()

    def loaded(message: str) -> dict[str, object]:
        _sha, (read, problems), (fresh, fresh_problems) = commit_and_read(repo, message, cache)
        assert problems == fresh_problems and sorted(read.environments) == sorted(fresh.environments)
        return dict(read.environments)

    first = loaded("one")
    _edit(root / "environments/studio-a/services/mixer.yaml", "mixer:3.1.0", "mixer:3.2.0")
    second = loaded("two")
    assert second["studio-b"] is first["studio-b"] and second["studio-a"] is not first["studio-a"]
    # a file added to studio-b (an unknown one: a problem of the folder, reported again)
    _write(root, {"environments/studio-b/stray.txt": "x\n"})
    third = loaded("three")
    assert third["studio-b"] is not second["studio-b"]
    assert loaded("four")["studio-b"] is third["studio-b"]  # the same folder again


def test_in_a_changed_environment_only_the_changed_service_files_are_checked_and_rendered_again(
    tmp_path: Path,
) -> None:
    from phrame.config_repo.render import _placement_context
    from phrame.config_repo.rules import service_context

    root, repo = _sample(tmp_path, {})
    cache = ReadCache()

    def kept(message: str) -> dict[str, object]:
        _sha, (loaded, read), _fresh = commit_and_read(repo, message, cache)
        assert validate(loaded, read, cache=cache) == []
        env = loaded.environments["studio-a"]
        out = {}
        for kept, context in (
            ("service-rules", service_context(loaded, env)),
            ("service-items", _placement_context(loaded, env)),  # rendered for the payload sizes
        ):
            found = cache.get((kept, context), large=True)
            assert isinstance(found, dict)
            out.update({(kept, file): made for (file, _blob), made in found.items()})
        return out

    first = kept("one")
    _edit(root / "environments/studio-a/services/mixer.yaml", "mixer:3.1.0", "mixer:3.2.0")
    second = kept("two")
    mixer = "environments/studio-a/services/mixer.yaml"
    assert sorted(first) == sorted(second) and len(first) == 2 * 6
    assert all(second[k] is first[k] for k in first if k[1] != mixer)
    assert all(second[k] is not first[k] for k in first if k[1] == mixer)
