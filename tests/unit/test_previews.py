"""Merge-request previews, the pure parts: the preview: rules (file:line), which services a
preview runs, where, with which host ports, and the environment it renders as."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from config_sync.previews.derive import (
    PORT_FIRST,
    PreviewSpec,
    PreviewUnplaceable,
    allocate_ports,
    choose_node,
    derive,
    preview_spec,
    published_ports,
    select_services,
)
from config_sync.previews.state import note_section
from phrame.config_repo import ConfigRepo, load_directory, render, validate
from phrame.config_repo.preview_rules import MAX_ENV_NAME_WITH_PREVIEW, preview_name
from phrame.config_repo.render import render_checked
from schemas import Topics

SAMPLE = Path(__file__).resolve().parents[2] / "fixtures" / "phrame-config"
ENV_YAML = "environments/studio-a/environment.yaml"


def sample(tmp_path: Path, preview: str | None = None) -> tuple[ConfigRepo, list[str]]:
    root = tmp_path / "repo"
    shutil.copytree(SAMPLE, root)
    if preview is not None:
        path = root / ENV_YAML
        path.write_text(path.read_text() + preview)
    repo, problems = load_directory(root)
    return repo, [p.format() for p in validate(repo, problems)]


def test_a_valid_preview_block_validates(tmp_path: Path) -> None:
    _, problems = sample(tmp_path, "preview:\n  nodes: {node: core-01}\n  services: [mixer]\n")
    assert problems == []


def test_unknown_node_service_and_labels_nobody_carries_are_errors_with_file_and_line(tmp_path: Path) -> None:
    _, problems = sample(tmp_path / "a", "preview:\n  nodes: {node: nowhere}\n  services: [mixer, ghost]\n")
    text = "\n".join(problems)
    assert f"{ENV_YAML}:" in text
    assert "unknown-node: node 'nowhere' is not in nodes/" in text
    assert "unknown-service: preview service 'ghost'" in text
    _, problems = sample(tmp_path / "b", "preview:\n  nodes:\n    labels: {pool: preview}\n")
    assert len(problems) == 1 and "preview-no-node" in problems[0] and "pool=preview" in problems[0]
    line = int(problems[0].split(":")[1])
    lines = (SAMPLE / ENV_YAML).read_text().count("\n")
    assert line == lines + 3  # the labels' line


def test_an_environment_name_too_long_for_its_preview_names_is_an_error(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    name = "e" * (MAX_ENV_NAME_WITH_PREVIEW + 1)
    (root / "environments" / name).mkdir(parents=True)
    (root / "nodes").mkdir()
    (root / "nodes" / "n1.yaml").write_text("name: n1\n")
    (root / "environments" / name / "environment.yaml").write_text(
        f"name: {name}\npreview:\n  nodes: {{node: n1}}\n"
    )
    repo, problems = load_directory(root)
    found = [p.format() for p in validate(repo, problems)]
    assert len(found) == 1 and "preview-name-too-long" in found[0] and "at most 49" in found[0]
    assert len(preview_name("e" * MAX_ENV_NAME_WITH_PREVIEW, 2**31 - 1)) == 63


def test_services_come_with_what_they_depend_on(tmp_path: Path) -> None:
    repo, _ = sample(tmp_path)
    env = repo.environments["studio-a"]
    assert select_services(env, ["mixer"]) == ["input-proc", "mixer"]
    assert select_services(env, ["egress", "ghost"]) == ["egress", "tams"]
    assert select_services(env, None) == sorted(env.services)


def test_ports_keep_their_host_port_when_free_else_take_the_lowest_free_in_the_range() -> None:
    keys = [("web", 0), ("api", 0)]
    first = allocate_ports(keys, used={PORT_FIRST})
    assert first == {("api", 0): PORT_FIRST + 1, ("web", 0): PORT_FIRST + 2}
    again = allocate_ports(keys, used={PORT_FIRST}, previous=first)
    assert again == first  # an update keeps its addresses
    moved = allocate_ports(keys, used={PORT_FIRST, PORT_FIRST + 1}, previous=first)
    assert moved[("web", 0)] == PORT_FIRST + 2 and moved[("api", 0)] == PORT_FIRST + 3
    with pytest.raises(PreviewUnplaceable, match="no free host port"):
        allocate_ports(keys, used=set(range(PORT_FIRST, 30000)))


def test_the_node_is_the_pin_or_a_stable_choice_among_the_labelled_nodes(tmp_path: Path) -> None:
    repo, _ = sample(tmp_path)
    assert choose_node(repo, PreviewSpec("studio-a", node="core-01"), "studio-a-mr-1") == "core-01"
    edges = PreviewSpec("studio-a", labels={"role": "edge"})
    picks = {choose_node(repo, edges, f"studio-a-mr-{i}") for i in range(20)}
    assert picks <= {"edge-01", "edge-02", "edge-03"} and len(picks) > 1
    assert choose_node(repo, edges, "studio-a-mr-5") == choose_node(repo, edges, "studio-a-mr-5")
    with pytest.raises(PreviewUnplaceable, match="role=nothing"):
        choose_node(repo, PreviewSpec("studio-a", labels={"role": "nothing"}), "studio-a-mr-1")


def test_the_preview_renders_as_its_own_environment_on_the_node_with_moved_ports(tmp_path: Path) -> None:
    repo, problems = sample(
        tmp_path, "preview:\n  nodes: {node: core-01}\n  services: [mixer]\n  auto_stop_h: 2\n"
    )
    assert problems == []
    spec = preview_spec(repo, "studio-a")
    assert spec == PreviewSpec("studio-a", node="core-01", services=("mixer",), auto_stop_h=2.0)
    env = repo.environments["studio-a"]
    services = select_services(env, spec.services)
    mappings = published_ports(env, services)
    ports = allocate_ports(mappings, used=set())
    derived = derive(repo, "studio-a", 12, services=services, node="core-01", ports=ports)
    topics = render_checked(derived, "a" * 40).topics(Topics())
    items = sorted(t for t in topics if "/containers/" in t or "/networks/" in t)
    assert items == [
        "phrame/desired/nodes/core-01/containers/studio-a-mr-12.input-proc.0",
        "phrame/desired/nodes/core-01/containers/studio-a-mr-12.mixer.0",
        *sorted(f"phrame/desired/nodes/core-01/networks/studio-a-mr-12.{n}" for n in ("control", "media")),
    ]
    mixer = topics["phrame/desired/nodes/core-01/containers/studio-a-mr-12.mixer.0"]
    assert mixer["environment"] == "studio-a-mr-12"
    assert mixer["depends_on"] == ["studio-a-mr-12.input-proc.0"]
    assert all(n.startswith("studio-a-mr-12.") for n in mixer["networks"])
    assert [(p["host_ip"], p["host_port"], p["container_port"]) for p in mixer["ports"]] == [
        ("127.0.0.1", ports[("mixer", 0)], 9100)
    ]
    assert ports[("mixer", 0)] >= PORT_FIRST
    # the environment's own rendering is untouched by deriving
    own = render(repo, commit="a" * 40).topics(Topics())
    assert not any("studio-a-mr-12" in t for t in own)


def test_a_preview_without_the_block_is_none(tmp_path: Path) -> None:
    repo, _ = sample(tmp_path)
    assert preview_spec(repo, "studio-a") is None and preview_spec(repo, "nope") is None


def test_the_note_section_lists_state_node_and_addresses() -> None:
    record = {
        "preview": "quickstart-mr-7",
        "state": "deployed",
        "commit": "b" * 40,
        "node": "dev-2",
        "services": ["cache", "web"],
        "addresses": [
            {"service": "web", "index": 0, "host_ip": "127.0.0.1", "host_port": 20000,
             "container_port": 8080, "protocol": "tcp"}
        ],
        "stop_at": 0,
        "gitlab_environment": "review/quickstart-mr-7",
        "gitlab_url": "https://gitlab.example.test/p/-/environments/3",
    }  # fmt: skip
    text = note_section([record])
    assert "**quickstart-mr-7** (deployed, at bbbbbbbbbbbb)" in text
    assert (
        "[GitLab environment review/quickstart-mr-7](https://gitlab.example.test/p/-/environments/3)" in text
    )
    assert "node `dev-2`" in text and "`127.0.0.1:20000` → web:8080/tcp" in text
    assert note_section([]) == ""


def test_a_preview_of_a_service_using_a_secret_carries_its_sops_file(tmp_path: Path) -> None:
    """The preview is rendered from a repository of its own: the environment's SOPS files go
    with it, or rendering the {secret: ...} of a previewed service fails (KeyError)."""
    from tests.support.sops import make_key, sops_encrypt

    root = tmp_path / "repo"
    shutil.copytree(SAMPLE, root)
    _, recipient = make_key(tmp_path / "keys", "core-01")
    for node in root.glob("nodes/*.yaml"):
        node.write_text(node.read_text() + f"age_recipient: {recipient}\n")
    sops_encrypt(
        {"token": "s3cret-value"}, [recipient], root / "environments/studio-a/secrets/page.sops.yaml"
    )
    mixer = root / "environments/studio-a/services/mixer.yaml"
    mixer.write_text(mixer.read_text().replace("env:\n", "env:\n  PAGE_TOKEN: {secret: page/token}\n", 1))
    (root / ENV_YAML).write_text(
        (root / ENV_YAML).read_text() + "preview:\n  nodes: {node: core-01}\n  services: [mixer]\n"
    )
    repo, problems = load_directory(root)
    assert [p.format() for p in validate(repo, problems)] == []
    env = repo.environments["studio-a"]
    services = select_services(env, ("mixer",))
    ports = allocate_ports(published_ports(env, services), used=set())
    derived = derive(repo, "studio-a", 3, services=services, node="core-01", ports=ports)
    topics = render_checked(derived, "a" * 40).topics(Topics())
    item = topics["phrame/desired/nodes/core-01/containers/studio-a-mr-3.mixer.0"]
    assert "page" in item["secrets"] and "s3cret-value" not in str(topics)
