"""Rendering: deterministic, schema-valid payloads; placement resolved; commits carried forward."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import git

from phrame.config_repo import load_directory, load_git, render, validate
from phrame.config_repo.render import carry_forward
from schemas import Topics, canonical_json, check_payload, digest
from tests.support.readings import commit_and_read

SAMPLE = Path(__file__).resolve().parents[2] / "fixtures" / "phrame-config"
T = Topics()


def rendered_topics(root: Path, commit: str | None = None) -> dict[str, dict]:
    repo, read = load_directory(root)
    assert validate(repo, read) == []
    return render(repo, commit=commit).topics()


def test_every_payload_fits_its_schema_and_digest_covers_the_spec() -> None:
    topics = rendered_topics(SAMPLE)
    for topic, payload in topics.items():
        check_payload(T.parse(topic).schema_name, payload)
        if "digest" in payload:
            spec = {k: v for k, v in payload.items() if k not in ("digest", "commit")}
            assert payload["digest"] == digest(spec)


def test_placement_pins_and_node_json(tmp_path: Path) -> None:
    topics = rendered_topics(SAMPLE)
    assert T.desired_item("edge-01", "containers", "studio-a.input-proc.0") in topics
    assert T.desired_item("edge-02", "containers", "studio-a.mixer.0") in topics
    assert T.desired_item("edge-03", "containers", "studio-a.mixer.1") in topics
    assert T.desired_item("edge-01", "processes", "studio-a.ptp-monitor.0") in topics
    process = topics[T.desired_item("edge-01", "processes", "studio-a.ptp-monitor.0")]
    assert process["replaces"] == ["studio-a.ptp-monitor-legacy.0"]
    # networks go only where a container uses them
    assert T.desired_item("edge-01", "networks", "studio-a.media") in topics
    manifest = topics[T.manifest("edge-01")]
    items = {
        k for k in topics if k.startswith("phrame/desired/nodes/edge-01/") and not k.endswith("manifest")
    }
    assert {f"phrame/desired/nodes/edge-01/{k}" for k in manifest["items"]} == items


def test_every_inventory_node_gets_a_manifest_even_when_empty(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    shutil.copytree(SAMPLE, root)
    (root / "nodes" / "spare-01.yaml").write_text("name: spare-01\n")
    topics = rendered_topics(root)
    assert topics[T.manifest("spare-01")]["items"] == {}


def test_defaults_merge_and_values_become_strings() -> None:
    topics = rendered_topics(SAMPLE)
    tams = topics[T.desired_item("core-01", "containers", "studio-a.tams.0")]
    assert tams["env"]["TZ"] == "Europe/London"  # environment default
    assert tams["labels"]["studio"] == "a"
    assert tams["restart"] == "unless-stopped"
    assert all(isinstance(v, str | dict) for v in tams["env"].values())
    egress = topics[T.desired_item("core-01", "containers", "studio-a.egress.0")]
    assert egress["depends_on"] == ["studio-a.tams.0"]


def test_render_is_byte_identical_and_stable_under_key_reordering(tmp_path: Path) -> None:
    first = json.dumps(rendered_topics(SAMPLE), sort_keys=True)
    assert json.dumps(rendered_topics(SAMPLE), sort_keys=True) == first
    root = tmp_path / "repo"
    shutil.copytree(SAMPLE, root)
    svc = root / "environments/studio-a/services/tams.yaml"
    lines = svc.read_text().splitlines(keepends=True)
    # move the top-level "name:" line to the end of the file
    name_line = next(line for line in lines if line.startswith("name:"))
    lines.remove(name_line)
    svc.write_text("".join(lines) + name_line)
    assert json.dumps(rendered_topics(root), sort_keys=True) == first


def test_change_moves_only_the_changed_item_and_carry_forward_keeps_the_rest(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    shutil.copytree(SAMPLE, root)
    before = carry_forward(rendered_topics(root, "c1"), {}, T)
    svc = root / "environments/studio-a/services/tams.yaml"
    svc.write_text(svc.read_text().replace("image: ", "image: x", 1))
    after = carry_forward(rendered_topics(root, "c2"), before, T)
    changed = sorted(t for t in after if after[t] != before.get(t))
    tams = T.desired_item("core-01", "containers", "studio-a.tams.0")
    assert changed == [T.env_service("studio-a", "tams"), tams, T.manifest("core-01")]
    assert after[tams]["commit"] == "c2"
    assert after[T.manifest("core-01")]["generation"] == 2
    assert after[T.manifest("edge-01")] == before[T.manifest("edge-01")]  # commit c1, generation 1
    assert after[T.desired_item("edge-01", "containers", "studio-a.input-proc.0")]["commit"] == "c1"


def test_carry_forward_keeps_a_declared_service_only_when_its_fields_are_the_very_values() -> None:
    """A declared service has no digest: the old payload stays when each field is the object
    published before (config-sync's read cache shares the parsed file), never on ``==``
    alone (``1 == True``, but their JSON differ)."""
    topic = T.env_service("lab", "web")
    declared = {"name": "web", "replicas": 1}
    old = {"kind": "container", "file": "environments/lab/services/web.yaml", "declared": declared}
    again = {**old}  # a new rendering of the same parsed file
    assert carry_forward({topic: again}, {topic: old}, T)[topic] is old
    truthy = {**old, "declared": {"name": "web", "replicas": True}}
    assert truthy == old and carry_forward({topic: truthy}, {topic: old}, T)[topic] is truthy
    copied = {**old, "declared": dict(declared)}  # equal, but not the object: encoded and compared later
    assert carry_forward({topic: copied}, {topic: old}, T)[topic] is copied
    moved = {**old, "file": "environments/lab/services/web.yml"}
    assert carry_forward({topic: moved}, {topic: old}, T)[topic] is moved


def test_two_commits_read_from_git_do_not_interfere(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    shutil.copytree(SAMPLE, root)
    repo = git.Repo.init(root)
    repo.git.add(A=True)
    c1 = repo.index.commit("one").hexsha
    (root / "environments/studio-a/services/egress.yaml").unlink()
    repo.git.add(A=True)
    c2 = repo.index.commit("two").hexsha
    one, _ = load_git(root, c1)
    two, _ = load_git(root, c2)
    assert validate(one) == validate(two) == []
    assert "egress" in one.environments["studio-a"].services
    assert "egress" not in two.environments["studio-a"].services
    assert (one.commit, two.commit) == (c1, c2)
    payload = render(one).topics()[T.desired_item("core-01", "containers", "studio-a.egress.0")]
    assert payload["commit"] == c1


def test_render_refuses_an_unvalidated_or_invalid_repo(tmp_path: Path) -> None:
    import pytest

    from phrame.config_repo import ConfigError

    repo, _ = load_directory(SAMPLE)
    with pytest.raises(ConfigError, match="validate"):
        render(repo)
    bad, read = load_directory(SAMPLE.parent / "invalid" / "unknown-node")
    validate(bad, read)
    with pytest.raises(ConfigError, match="unknown-node"):
        render(bad)


def test_read_cache_reparses_only_changed_blobs_and_gives_the_same_result(tmp_path: Path) -> None:
    from phrame.config_repo import ReadCache, load
    from phrame.config_repo.sources import GitSource

    root = tmp_path / "repo"
    shutil.copytree(SAMPLE, root)
    repo = git.Repo.init(root)
    repo.git.add(A=True)
    c1 = repo.index.commit("one").hexsha
    svc = root / "environments/studio-a/services/tams.yaml"
    svc.write_text(svc.read_text().replace("image: ", "image: x", 1))
    (root / "nodes/edge-03.yaml").write_text("name: edge-03\ncordoned: maybe\n")  # now invalid
    repo.git.add(A=True)
    c2 = repo.index.commit("two").hexsha

    cache = ReadCache()
    first, read1 = load(GitSource(root, c1), cache=cache)
    assert validate(first, read1, cache=cache) == []
    files = len(list(GitSource(root, c1).files()))
    misses = cache.misses
    second, read2 = load(GitSource(root, c2), cache=cache)
    problems = validate(second, read2, cache=cache)
    # only the two changed files were parsed and schema-checked again, the changed
    # service's ports read again (the node's file has none), and its environment's folder
    # loaded, its rules run and its replicas placed again (one environment; its services'
    # own rules under a changed inventory)
    assert cache.misses - misses == 2 * 2 + 1 + 4
    uncached, read3 = load(GitSource(root, c2))
    assert problems == validate(uncached, read3) and [p.rule for p in problems] == ["schema"]
    # a cached reading renders exactly like a fresh one
    again, read4 = load(GitSource(root, c1), cache=cache)
    validate(again, read4, cache=cache)
    fresh, read5 = load(GitSource(root, c1))
    validate(fresh, read5)
    assert render(again).topics() == render(fresh).topics()
    assert files > 10 and len(cache) >= files


def test_render_after_validate_reuses_what_the_payload_check_rendered(monkeypatch: Any) -> None:
    import sys

    render_module = sys.modules["phrame.config_repo.render"]  # phrame.config_repo.render is the function
    calls: list[str] = []
    real = render_module.render_checked

    def counted(repo: Any, sha: str, cache: Any = None) -> Any:
        calls.append(sha)
        return real(repo, sha, cache)

    monkeypatch.setattr(render_module, "render_checked", counted)
    monkeypatch.setattr("phrame.config_repo.payload_size.render_checked", counted)
    repo, read_problems = load_directory(SAMPLE)
    repo.commit = "a" * 40  # as load_git sets it
    assert validate(repo, read_problems) == []
    topics = render(repo).topics(Topics())
    assert calls == ["a" * 40] and topics  # one rendering, for both
    assert render(repo, commit="b" * 40).commit == "b" * 40 and len(calls) == 2  # another commit: rendered


def test_incremental_validate_and_render_equal_a_fresh_reading_over_a_series_of_commits(
    tmp_path: Path,
) -> None:
    """One cache across commits (config-sync's): every commit's problems, payloads and
    payload sizes equal those of a reading without a cache, whatever changed: a service,
    the environment's defaults, a dependency's node, the placement, an invalid commit, a
    return to the first commit's content."""
    from phrame.config_repo import ReadCache
    from phrame.config_repo.render import render_checked

    root = tmp_path / "repo"
    shutil.copytree(SAMPLE, root)
    repo = git.Repo.init(root)
    env = root / "environments/studio-a"
    originals = {p: p.read_text() for p in env.rglob("*") if p.is_file()}

    def edit(path: Path, old: str, new: str) -> None:
        text = path.read_text()
        assert old in text, (path, old)
        path.write_text(text.replace(old, new, 1))

    def restore() -> None:
        for p, text in originals.items():
            p.write_text(text)

    changes = [
        lambda: None,
        lambda: edit(env / "services/mixer.yaml", "mixer:3.1.0", "mixer:3.2.0"),
        lambda: edit(env / "environment.yaml", "LOG_LEVEL: info", "LOG_LEVEL: debug"),
        # mixer's depends_on moves
        lambda: edit(env / "services/input-proc.yaml", "node: edge-01", "node: edge-02"),
        lambda: edit(env / "node.json", '"edge-02",\n      "edge-03"', '"edge-01",\n      "edge-03"'),
        lambda: edit(env / "services/mixer.yaml", "memory: 6Gi", "memory: 6Gx"),  # invalid
        # invalid twice: a port rule's problem, kept by the file's content, and then gone
        lambda: edit(env / "services/mixer.yaml", '"127.0.0.1:9100:9100"', '"127.0.0.1:9100-9101:9100"'),
        restore,  # the first commit's content: every item from the cache
        lambda: edit(env / "services/mixer.yaml", "memory: 6Gi", "memory: 7Gi"),
    ]
    cache = ReadCache()
    rendered = 0
    for i, change in enumerate(changes):
        change()
        sha, (cached, read_cached), (fresh, read_fresh) = commit_and_read(repo, f"commit {i}", cache)
        problems = validate(cached, read_cached, cache=cache)
        assert problems == validate(fresh, read_fresh), i
        assert bool(problems) == (i in (5, 6)), (i, problems)
        assert any(p.rule == "port-syntax" for p in problems) == (i == 6), (i, problems)
        if problems:
            continue
        a, b = render(cached, commit=sha), render(fresh, commit=sha)
        assert a.topics() == b.topics(), i
        assert a.sizes == render_checked(fresh, sha).sizes, i
        for (node, key), size in a.sizes.items():  # what the payload check measures
            assert size == len(canonical_json(a.nodes[node].items[key])), (i, node, key)
        rendered += 1
    assert rendered == len(changes) - 2
    assert cache.hits > 0
