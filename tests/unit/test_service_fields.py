"""The compose fields of a container service: stop_signal, stop_grace_period,
user, working_dir, hostname, extra_hosts, ulimits, logging. Bad values are ``schema``
problems at the value (file:line:col); render writes them only when set, so a repository
that sets none renders byte for byte as before they existed (no redeploy on upgrade)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from ruamel.yaml import YAML

from phrame.config_repo import load_directory, render, validate
from phrame.config_repo.container_fields import FIELDS
from schemas import Topics, check_payload
from tests.unit.test_validate_limits import problems_of, service

SAMPLE = Path(__file__).resolve().parents[2] / "fixtures" / "phrame-config"
WEB = "environments/lab/services/web.yaml"
ENV = "environments/lab/environment.yaml"
T = Topics()

# The sample's container digests as rendered before these fields existed (main at 0564059).
BEFORE = {
    "core-01/containers/studio-a.egress.0": "4d3851e5733a430100d24920f875e0c110d9a54b94c47d33e289002735625af7",
    "core-01/containers/studio-a.tams.0": "cd4552dbe3513d5d818cfce2623a5eb4abd0ff5a4e218ed3a32064e18891c215",
    "edge-01/containers/studio-a.input-proc.0": "9f050a44e166babb1a7838e173e3f3b719c6cacad50c2ed0bee606c376e1951c",
    "edge-01/containers/studio-a.ptp-monitor-legacy.0": "ba52fc9ab087cd7252e5a1e5038630c4841b39265136ab8425ae0ae30649a0a1",
    "edge-02/containers/studio-a.mixer.0": "447485de36d6eaf382c842972bd94ae570528a6d218efae568f3477658203c10",
    "edge-03/containers/studio-a.mixer.1": "c1b83494cdf84e996353067f915de4c32e2c30d94b5ea6aa977c998382c1f7e0",
}


def _render(root: Path) -> dict[str, dict]:
    repo, read = load_directory(root)
    assert validate(repo, read) == []
    return render(repo).topics()


def _strip_new_fields(root: Path) -> None:
    """The sample as it was before: the new fields removed from every service and default."""
    yaml = YAML()
    for path in (root / "environments").rglob("*.yaml"):
        doc = yaml.load(path)
        for mapping in (doc, doc.get("defaults") or {}):
            for key in FIELDS:
                mapping.pop(key, None)
        yaml.dump(doc, path)


def test_a_repository_without_the_fields_keeps_every_digest(tmp_path: Path) -> None:
    root = tmp_path / "sample"
    shutil.copytree(SAMPLE, root)
    _strip_new_fields(root)
    topics = _render(root)
    found = {
        t.removeprefix("phrame/desired/nodes/"): p["digest"].removeprefix("sha256:")
        for t, p in topics.items()
        if "/containers/" in t
    }
    assert found == BEFORE
    assert not any(key in p for t, p in topics.items() if "/containers/" in t for key in FIELDS)


def test_the_sample_uses_the_fields_and_its_payloads_fit_the_schema() -> None:
    topics = _render(SAMPLE)
    used = {key for t, p in topics.items() if "/containers/" in t for key in FIELDS if key in p}
    assert used == set(FIELDS)
    for topic, payload in topics.items():
        check_payload(T.parse(topic).schema_name, payload)


def _payload(tmp_path: Path, files: dict[str, str]) -> dict:
    root = tmp_path / "repo"
    base = {
        "nodes/n1.yaml": "name: n1\n",
        ENV: "name: lab\n",
    }
    for name, content in {**base, **files}.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(content)
    payload = _render(root)[T.desired_item("n1", "containers", "lab.web.0")]
    check_payload("desired-container", payload)
    return payload


def test_render_writes_each_field_in_payload_form(tmp_path: Path) -> None:
    lines = [
        "stop_signal: SIGINT",
        "stop_grace_period: 1500ms",
        'user: "1000:1000"',
        "working_dir: /srv/app",
        "hostname: web-1.lab",
        "extra_hosts: {db.local: 10.0.0.5, gw: host-gateway, v6: 'fd00::5'}",
        "ulimits: {nproc: 512, nofile: {soft: 1024, hard: 2048}, memlock: {soft: -1, hard: -1}}",
        "logging: {driver: json-file, options: {max-size: 10m, max-file: 3, compress: true}}",
    ]
    payload = _payload(tmp_path, service("web", *lines))
    assert {k: payload[k] for k in FIELDS} == {
        "stop_signal": "SIGINT",
        "stop_grace_period": "1500ms",
        "user": "1000:1000",
        "working_dir": "/srv/app",
        "hostname": "web-1.lab",
        "extra_hosts": {"db.local": "10.0.0.5", "gw": "host-gateway", "v6": "fd00::5"},
        "ulimits": {
            "memlock": {"soft": -1, "hard": -1},
            "nofile": {"soft": 1024, "hard": 2048},
            "nproc": {"soft": 512, "hard": 512},
        },
        "logging": {
            "driver": "json-file",
            "options": {"compress": "true", "max-file": "3", "max-size": "10m"},
        },
    }


def test_environment_defaults_apply_and_a_service_value_replaces_them_whole(tmp_path: Path) -> None:
    env = (
        "name: lab\ndefaults:\n  stop_signal: 3\n  stop_grace_period: 30s\n"
        "  ulimits: {nofile: 4096, core: 0}\n"
        "  logging: {driver: json-file, options: {max-size: 10m}}\n"
    )
    inherited = _payload(tmp_path / "a", {ENV: env, **service("web")})
    assert (inherited["stop_signal"], inherited["stop_grace_period"]) == (3, "30s")
    assert inherited["ulimits"] == {"core": {"soft": 0, "hard": 0}, "nofile": {"soft": 4096, "hard": 4096}}
    assert inherited["logging"] == {"driver": "json-file", "options": {"max-size": "10m"}}
    own = _payload(
        tmp_path / "b", {ENV: env, **service("web", "ulimits: {nproc: 64}", "logging: {driver: local}")}
    )
    assert own["ulimits"] == {"nproc": {"soft": 64, "hard": 64}}
    assert own["logging"] == {"driver": "local"}
    assert own["stop_grace_period"] == "30s"


@pytest.mark.parametrize(
    ("line", "path", "column", "says"),
    [
        ("stop_signal: TERM", "/stop_signal", 14, "starting with `SIG`"),
        ("stop_signal: SIGFOO", "/stop_signal", 14, "no such signal on Linux"),
        ("stop_signal: 99", "/stop_signal", 14, "99 is greater than the maximum of 64"),
        ("stop_signal: 0", "/stop_signal", 14, "0 is less than the minimum of 1"),
        ("stop_grace_period: 10", "/stop_grace_period", 20, "10 is not of type 'string'"),
        ("stop_grace_period: 2 days", "/stop_grace_period", 20, "a duration such as `10s`"),
        ("stop_grace_period: 25h", "/stop_grace_period", 20, "a duration is at most 24h"),
        ("user: 'root; rm -rf /'", "/user", 7, "a user name or number"),
        ("working_dir: app", "/working_dir", 14, "an absolute path"),
        ("hostname: web_1", "/hostname", 11, "a host name (RFC 1123)"),
        ("hostname: " + "a" * 65, "/hostname", 11, "at most 64 characters"),
        ("extra_hosts: {db.local: 10.0.0.999}", "/extra_hosts/db.local", 25, "not an IPv4 or IPv6 address"),
        ("extra_hosts: [db.local:10.0.0.5]", "/extra_hosts", 14, "is not of type 'object'"),
        ("ulimits: {nofiles: 1024}", "/ulimits", 10, "'nofiles' is not one of"),
        (
            "ulimits: {nofile: {soft: 2048, hard: 1024}}",
            "/ulimits/nofile",
            19,
            "soft 2048 is above hard 1024",
        ),
        ("ulimits: {nofile: {soft: 1024}}", "/ulimits/nofile", 19, "'hard' is a required property"),
        ("ulimits: {nproc: -2}", "/ulimits/nproc", 18, "-2 is less than the minimum of -1"),
        ("logging: {options: {max-size: 10m}}", "/logging", 10, "'driver' is a required property"),
        ("logging: {driver: json-file, option: {}}", "/logging/option", 30, "unknown key 'option'"),
        (
            "logging: {driver: json-file, options: {max-size: [1]}}",
            "/logging/options/max-size",
            50,
            "is not of type",
        ),
    ],
)
def test_a_bad_value_is_a_schema_problem_at_its_place(
    tmp_path: Path, line: str, path: str, column: int, says: str
) -> None:
    found = problems_of(tmp_path, service("web", line))
    assert [(p.file, p.rule, p.line, p.path) for p in found] == [(WEB, "schema", 5, path)], found
    assert found[0].column == column
    assert says in found[0].message, found[0].message


def test_defaults_are_checked_like_the_service_fields(tmp_path: Path) -> None:
    env = "name: lab\ntrack: main\ndefaults:\n  stop_grace_period: forever\n  logging: {driver: ''}\n"
    found = problems_of(tmp_path, {ENV: env})
    assert [(p.file, p.line, p.path) for p in found] == [
        (ENV, 4, "/defaults/stop_grace_period"),
        (ENV, 5, "/defaults/logging/driver"),
    ]
