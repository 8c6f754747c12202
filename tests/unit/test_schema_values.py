"""Values the schema used to accept but that cannot work: subnets that
are no network, durations of 10^23 hours, tracked refs git would refuse or read as an option,
images that look like a command-line flag, health check retries past any integer Docker
takes. Each is a ``schema`` problem at the value; what works still validates."""

from __future__ import annotations

from pathlib import Path

import pytest

from phrame.config_repo import Problem
from tests.unit.test_validate_limits import problems_of, service

WEB = "environments/lab/services/web.yaml"
ENV = "environments/lab/environment.yaml"
NET = "environments/lab/networks/media.yaml"


def schema_problem(found: list[Problem], file: str) -> Problem:
    assert [(p.file, p.rule) for p in found] == [(file, "schema")], found
    return found[0]


# -- subnets -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("subnet", "reason"),
    [
        ("999.1.1.1/99", "not an IPv4 or IPv6 network"),
        ("10.77.0.1/24", "host bits are set: the network is 10.77.0.0/24"),
        ("10.77.0.0", "needs a prefix length"),
        ("10.77.0.0/255.255.255.0", "needs a prefix length"),
        ("10.77.0.0/32", "leaves no address"),
        ("fd00:77::/129", "not an IPv4 or IPv6 network"),
        ("010.77.0.0/24", "not an IPv4 or IPv6 network"),
    ],
)
def test_subnet_must_be_a_usable_network(tmp_path: Path, subnet: str, reason: str) -> None:
    found = problems_of(tmp_path, {NET: f"name: media\nsubnet: '{subnet}'\n"})
    p = schema_problem(found, NET)
    assert (p.line, p.column, p.path) == (2, 9, "/subnet")
    assert p.message.startswith(f"{subnet!r} is not valid: ") and reason in p.message


@pytest.mark.parametrize("subnet", ["10.77.0.0/24", "172.28.0.0/16", "10.0.0.0/30", "fd00:77::/64"])
def test_real_networks_are_fine(tmp_path: Path, subnet: str) -> None:
    assert problems_of(tmp_path, {NET: f"name: media\nsubnet: '{subnet}'\n"}) == []


# -- health check durations and retries ---------------------------------------------------------


@pytest.mark.parametrize(
    ("key", "value", "reason"),
    [
        ("interval", "100000000000000000000000h", "at most 24h"),
        ("timeout", "25h", "at most 24h"),
        ("start_period", "23h59m60s1ns", "at most 24h"),
        ("interval", "500us", "at least 1ms"),
    ],
)
def test_durations_are_capped(tmp_path: Path, key: str, value: str, reason: str) -> None:
    found = problems_of(tmp_path, service("web", "healthcheck:", "  test: 'true'", f"  {key}: {value}"))
    p = schema_problem(found, WEB)
    assert (p.line, p.path) == (7, f"/healthcheck/{key}")
    assert reason in p.message


@pytest.mark.parametrize("value", ["0s", "1ms", "10s", "1m30s", "1.5h", "24h", "23h59m60s"])
def test_durations_up_to_a_day_are_fine(tmp_path: Path, value: str) -> None:
    lines = ["healthcheck:", "  test: 'true'", f"  interval: {value}", f"  start_period: {value}"]
    assert problems_of(tmp_path, service("web", *lines)) == []


def test_retries_are_capped(tmp_path: Path) -> None:
    lines = ["healthcheck:", "  test: 'true'", "  retries: " + "9" * 30]
    p = schema_problem(problems_of(tmp_path, service("web", *lines)), WEB)
    assert p.path == "/healthcheck/retries" and "maximum of 1000" in p.message


# -- tracked refs ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("track", "reason"),
    [
        ("../../../HEAD", "'..'"),
        ("--upload-pack=x", "starts with '-'"),
        ("-main", "starts with '-'"),
        ("refs/heads/-x", "starts with '-'"),
        ("refs/tags/--x", "starts with '-'"),
        ("main.lock", "'.lock'"),
        ("feature/.hidden", "starts with '.'"),
        ("a//b", "'//'"),
        ("main/", "ends with '/'"),
        ("/main", "starts with '/'"),
        ("main.", "ends with '.'"),
        ("x@{1}", "'@{'"),
        ("@", "'@'"),
        ("HEAD", "HEAD"),
        ("refs/remotes/origin/main", "refs/heads/ or refs/tags/"),
        ("refs/heads/", "names no branch"),
        ("a b", "' '"),
        ("v1~1", "'~'"),
    ],
)
def test_track_must_be_a_git_branch_or_tag(tmp_path: Path, track: str, reason: str) -> None:
    found = problems_of(tmp_path, {ENV: f"name: lab\ntrack: '{track}'\n"})
    p = next(p for p in found if p.rule == "schema")
    assert (p.file, p.line, p.column, p.path) == (ENV, 2, 8, "/track")
    assert reason in p.message, p.message


@pytest.mark.parametrize(
    "track", ["main", "refs/heads/main", "refs/tags/v1.4", "release-1.2", "feature/new-mixer", "v1.4-rc.1"]
)
def test_ordinary_branches_and_tags_are_fine(tmp_path: Path, track: str) -> None:
    placement = "review" if track.startswith("refs/tags/") else "auto"
    assert problems_of(tmp_path, {ENV: f"name: lab\ntrack: '{track}'\nplacement: {placement}\n"}) == []


# -- images ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "image",
    [
        "--privileged",
        "-x",
        "Mixer:1",  # names are lower case
        "mixer:",
        "mixer:-1",
        "mixer@sha256:abc",
        "mixer::1",
        "registry.test/",
        "a/b//c",
        "mixer:" + "t" * 129,
        "x" * 5000 + "!",  # long and wrong: refused at once, not by backtracking
    ],
)
def test_image_must_be_a_docker_reference(tmp_path: Path, image: str) -> None:
    files = service("web")
    files[WEB] = files[WEB].replace("image: x:1", f"image: '{image}'")
    p = schema_problem(problems_of(tmp_path, files), WEB)
    assert (p.line, p.column, p.path) == (2, 8, "/image")
    assert "is not valid: " in p.message and "never starts with `-`" in p.message


@pytest.mark.parametrize(
    "image",
    [
        "busybox",
        "x:1",
        "phrame-test/busybox:latest",
        "registry.studio.test/media/mixer:3.1.0",
        "127.0.0.1:5000/phrame/busybox:run-123-abc_DEF.1",
        "localhost:5000/a/b/c",
        "[::1]:5000/mixer:1",
        "Registry.Test/mixer",
        "my_org/my__app-x.y:1",
        "mixer@sha256:" + "a" * 64,
        "registry.test:443/mixer:3.1@sha256:" + "0" * 64,
    ],
)
def test_docker_references_are_fine(tmp_path: Path, image: str) -> None:
    files = service("web")
    files[WEB] = files[WEB].replace("image: x:1", f"image: '{image}'")
    assert problems_of(tmp_path, files) == []
