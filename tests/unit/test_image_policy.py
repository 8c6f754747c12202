"""The ``images:`` policy, purely: semver ranges as npm reads them, tag patterns and their
order, which tags are newer than the current one, ``min_age``, the branch name and the
one-line rewrite of a service file's ``image:``."""

from __future__ import annotations

from pathlib import Path

import pytest

from image_watch.names import registry_and_path, update_branch
from image_watch.proposal import RewriteError, rewrite
from phrame.cli import main
from phrame.config_repo.image_policy import ImagePolicy, PolicyError, age_seconds, split_image
from phrame.config_repo.semver_range import RangeError, parse_range, parse_version

ALLOWED = [
    ("^1.2", "1.2.0", True), ("^1.2", "1.9.3", True), ("^1.2", "2.0.0", False), ("^1.2", "1.1.9", False),
    ("^0.2.3", "0.2.9", True), ("^0.2.3", "0.3.0", False), ("^0.0.3", "0.0.4", False),
    ("~1.4.0", "1.4.7", True), ("~1.4.0", "1.5.0", False), ("~1", "1.9.0", True),
    (">=1.0 <2", "1.99.0", True), (">=1.0 <2", "2.0.0", False), (">= 1.0", "3.0.0", True),
    ("1.x", "1.7.0", True), ("1.2.*", "1.3.0", False), ("*", "9.0.0", True),
    ("1.2.3", "1.2.3", True), ("1.2.3", "1.2.4", False), ("^1 || ^3", "3.1.0", True), ("^1 || ^3", "2.0.0", False),
    ("^1.2", "v1.3.0", True), ("^1.2", "1.3", True),
    ("^1.2", "1.3.0-rc.1", False), (">=1.3.0-rc.1 <2", "1.3.0-rc.2", True), (">=1.3.0-rc.1 <2", "1.4.0-rc.1", False),
    (">1.2", "1.2.9", False), (">1.2", "1.3.0", True), ("<=1.2", "1.2.9", True), ("<=1.2", "1.3.0", False),
]  # fmt: skip


@pytest.mark.parametrize(("text", "tag", "allowed"), ALLOWED)
def test_a_range_allows_the_versions_npm_would(text: str, tag: str, allowed: bool) -> None:
    version = parse_version(tag)
    assert version is not None
    assert parse_range(text).allows(version) is allowed


@pytest.mark.parametrize("text", ["", "^banana", ">=1.0 <", "1.2.3.4", "^1.2-rc", "||"])
def test_a_bad_range_is_refused_saying_which_part(text: str) -> None:
    with pytest.raises(RangeError):
        parse_range(text)


def test_versions_order_as_semver_does() -> None:
    tags = ["1.0.0", "1.0.0-rc.1", "1.0.0-alpha", "1.0.0-alpha.1", "0.9.10", "0.9.9", "1.0.0-1"]
    versions = {t: parse_version(t) for t in tags}
    ordered = sorted(tags, key=lambda t: versions[t])  # type: ignore[arg-type, return-value]
    assert ordered == ["0.9.9", "0.9.10", "1.0.0-1", "1.0.0-alpha", "1.0.0-alpha.1", "1.0.0-rc.1", "1.0.0"]
    assert parse_version("latest") is None and parse_version("01.2.3") is None


def test_newer_tags_are_the_allowed_ones_past_the_current_highest_first() -> None:
    policy = ImagePolicy.read("web", {"semver": "^1.2", "min_age": "1h"})
    tags = ["1.1.0", "1.2.0", "1.2.5", "1.10.0", "2.0.0", "latest", "1.3.0-rc.1", "1.9.0"]
    assert policy.newer("1.2.0", tags) == ["1.10.0", "1.9.0", "1.2.5"]
    assert policy.newer("1.10.0", tags) == []
    assert policy.newer("latest", tags) == ["1.10.0", "1.9.0", "1.2.5", "1.2.0"]  # any allowed tag pins it
    assert policy.newer("0.9.0", tags)[0] == "1.10.0"  # below the range: still older
    assert policy.min_age_s == 3600


def test_a_pattern_orders_by_its_group_as_a_number() -> None:
    policy = ImagePolicy.read("web", {"pattern": r"^build-(\d+)$"})
    tags = ["build-9", "build-10", "build-100", "build-x", "prefix-build-200", "build-8"]
    assert policy.newer("build-9", tags) == ["build-100", "build-10"]
    whole = ImagePolicy.read("web", {"pattern": r"^2026\.\d\d\.\d\d$"})
    assert whole.newer("2026.01.31", ["2026.02.01", "2025.12.31", "2026.01.30"]) == ["2026.02.01"]


@pytest.mark.parametrize(
    "spec",
    [{"pattern": "^(a"}, {"pattern": "(a)(b)"}, {"semver": "^1", "pattern": "x"}, {}, {"semver": "nope"},
     {"semver": "^1", "min_age": "1y"}],
)  # fmt: skip
def test_a_bad_policy_is_a_policy_error(spec: dict[str, str]) -> None:
    with pytest.raises(PolicyError):
        ImagePolicy.read("web", spec)


def test_ages() -> None:
    assert age_seconds("30m") == 1800 and age_seconds("1d12h") == 129600 and age_seconds("0s") == 0
    for bad in ("", "1", "h", "1h 2m", "-1h"):
        with pytest.raises(PolicyError):
            age_seconds(bad)


def test_images_and_registries_read_as_docker_reads_them() -> None:
    digest = "sha256:" + "a" * 64
    assert split_image("nginx") == ("nginx", None, None)
    assert split_image("127.0.0.1:5000/lab/web:1.2@" + digest) == ("127.0.0.1:5000/lab/web", "1.2", digest)
    assert registry_and_path("nginx") == ("docker.io", "library/nginx")
    assert registry_and_path("grafana/grafana") == ("docker.io", "grafana/grafana")
    assert registry_and_path("registry.studio.test/media/egress") == ("registry.studio.test", "media/egress")
    assert registry_and_path("localhost/x") == ("localhost", "x")


def test_the_branch_names_the_update() -> None:
    assert update_branch("lab", "web", "1.3.0") == "image-update/lab/web/1.3.0"
    assert update_branch("lab", "web", "1..3") == "image-update/lab/web/1._3"


def test_rewrite_changes_only_the_image_value() -> None:
    text = 'name: web\nimage: "r/web:1.2"  # pinned\nenv:\n  image: kept\n'
    out = rewrite(text, 2, "r/web:1.3@sha256:" + "b" * 64)
    assert out == f'name: web\nimage: "r/web:1.3@sha256:{"b" * 64}"  # pinned\nenv:\n  image: kept\n'
    assert rewrite("image: a:1\r\n", 1, "a:2") == "image: a:2\r\n"
    with pytest.raises(RewriteError):
        rewrite("{name: web, image: a:1}\n", 1, "a:2")


def test_validate_points_at_each_bad_policy(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    files = {
        "nodes/n1.yaml": "name: n1\n",
        "environments/lab/environment.yaml": (
            "name: lab\nimages:\n  web: {semver: '^1.2'}\n  mon:\n    pattern: '(a)(b)'\n"
            "  ghost: {semver: '^1'}\n  host: {semver: '^1'}\n"
        ),
        "environments/lab/services/web.yaml": "name: web\nimage: r/web:1.2.0\nplacement: {node: n1}\n",
        "environments/lab/services/mon.yaml": "name: mon\nimage: r/mon:a\nplacement: {node: n1}\n",
        "environments/lab/services/host.yaml": "name: host\nkind: process\ncommand: [/bin/true]\nplacement: {node: n1}\n",
    }
    for rel, text in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    assert main(["validate", str(tmp_path)]) == 1
    out = capsys.readouterr().out.splitlines()
    where = "environments/lab/environment.yaml"
    assert f"{where}:5:14: image-policy: mon: pattern '(a)(b)' has 2 groups: at most one (the order)" in out
    assert (
        f"{where}:6:10: unknown-service: images policy for 'ghost': no such service in environments/lab/services/"
        in out
    )
    assert f"{where}:7:9: image-policy: host: the service has no image to update" in out
    assert not [line for line in out if ":3:" in line]  # web's policy is fine
