"""The node policy's check (schemas.node_policy): what a desired item may ask of its host."""

from __future__ import annotations

from typing import Any

import pytest

from schemas import check_payload
from schemas.node_policy import PROTECTED, HostLookups, NodePolicy, as_error, normal
from schemas.node_policy import violations as found


def violations(spec: dict[str, Any], policy: NodePolicy, **kw: Any) -> list[str]:
    return [str(v) for v in found(spec, policy, **kw)]


def box(*volumes: str, ports: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    return {"kind": "container", "name": "lab.app.0", "volumes": list(volumes), "ports": ports or []}


def proc(user: str | None = None) -> dict[str, Any]:
    return {"kind": "process", "name": "lab.tool.0", "command": ["true"], "user": user}


def port(host_ip: str | None, host_port: int | None = 8080) -> dict[str, Any]:
    return {"host_ip": host_ip, "host_port": host_port, "container_port": 80, "protocol": "tcp"}


DEFAULT = NodePolicy()
SRV = NodePolicy(allow=("/srv",))


@pytest.mark.parametrize(
    "volume",
    ["/:/host", "/var/run/docker.sock:/var/run/docker.sock", "/etc/shadow:/shadow:ro", "/srv/data:/data"],
)
def test_the_default_policy_allows_no_bind_mount(volume: str):
    (why,) = violations(box(volume), DEFAULT)
    assert "under no allowed root (bind_mounts.allow: none)" in why and "volumes[0]" in why


def test_named_volumes_and_anonymous_ones_are_no_host_paths():
    assert violations(box("data:/data", "/cache"), DEFAULT) == []


@pytest.mark.parametrize("volume", ["/srv/app:/app", "/srv:/srv:ro", "/srv/a/../b:/b"])
def test_paths_under_an_allowed_root_are_allowed(volume: str):
    assert violations(box(volume), SRV) == []


@pytest.mark.parametrize("volume", ["/srv/../etc:/x", "//etc/passwd:/p", "/srv/./../root:/r", "/srvx:/x"])
def test_dot_dot_and_look_alike_prefixes_do_not_escape_the_root(volume: str):
    assert violations(box(volume), SRV), volume


def test_protected_paths_stay_refused_under_an_allowed_root():
    wide = NodePolicy(allow=("/", "/var"))
    for volume in ["/:/host", "/etc:/etc", "/proc/1:/p", "/var/run/docker.sock:/s", "/var:/var", "/run:/run"]:
        (why,) = violations(box(volume), wide)
        assert "protected unless bind_mounts.allow lists it" in why, (volume, why)
    assert violations(box("/home/app:/h"), wide) == []


def test_a_protected_path_is_lifted_only_where_allow_names_it_or_inside_it():
    p = NodePolicy(allow=("/var/run/docker.sock", "/etc/ssl"))
    assert violations(box("/var/run/docker.sock:/s", "/etc/ssl/certs:/c:ro"), p) == []
    assert violations(box("/etc:/etc"), p)  # only what was listed
    assert violations(box("/var/run:/r"), NodePolicy(allow=("/var/run",)))  # holds the socket
    everything = NodePolicy(allow=PROTECTED)
    assert violations(box("/:/host"), everything) == []


def test_deny_wins_over_allow():
    p = NodePolicy(allow=("/srv",), deny=("/srv/keys",))
    assert "bind_mounts.deny" in violations(box("/srv/keys/a:/a"), p)[0]
    assert "bind_mounts.deny" in violations(box("/srv:/srv"), p)[0]  # holds it
    assert violations(box("/srv/app:/app"), p) == []


def test_a_link_is_judged_by_where_it_leads():
    links = {"/srv/x": "/", "/srv/y": "/srv/data"}
    host = HostLookups(resolve=lambda p: links.get(p, p))
    (why,) = violations(box("/srv/x:/host"), SRV, host=host)
    assert "/srv/x (a link to /)" in why
    assert violations(box("/srv/y:/y"), SRV, host=host) == []


def test_ports_on_every_interface_are_refused_by_default():
    spec = box(ports=[port(None), port("0.0.0.0"), port("::"), port(None, None), port("127.0.0.1")])
    refused = violations(spec, DEFAULT)
    assert [w.split(" on")[0] for w in refused] == ["port 8080->80/tcp"] * 3 + ["port a free port->80/tcp"]
    assert violations(spec, NodePolicy(all_interfaces=True)) == []


def test_processes_are_refused_unless_allowed():
    assert violations(proc("app"), DEFAULT) == ["host process (kind: process): processes.allowed is false"]
    assert violations(proc("app"), NodePolicy(processes=True)) == []


def test_a_process_never_runs_as_root_unless_listed():
    allowed = NodePolicy(processes=True, agent_user="root")
    for spec in (proc("root"), proc("0"), proc(None)):
        (why,) = violations(spec, allowed)
        assert "as root" in why, why
    assert "the agent's own, root" in violations(proc(None), allowed)[0]
    alias = HostLookups(uid_of=lambda u: 0 if u == "toor" else 1000)
    assert violations(proc("toor"), allowed, host=alias)
    listed = NodePolicy(processes=True, users=("root", "app"))
    assert violations(proc("root"), listed) == []
    assert "not in processes.users" in violations(proc("media"), listed)[0]


def test_errors_say_what_where_and_by_which_policy():
    p = NodePolicy(file="/etc/phrame/policy.yaml")
    (why,) = found(box("/etc:/etc"), p)
    assert why.path == ("volumes", 0)
    line = as_error(why, item="lab.app.0", node="n1", policy=p)
    assert line.startswith("policy: lab.app.0: bind mount of /etc (volumes[0] '/etc:/etc'): ")
    assert line.endswith("not allowed on n1 by policy file /etc/phrame/policy.yaml")


def test_the_status_form_round_trips_and_matches_its_schema():
    p = NodePolicy(
        allow=("/srv",), deny=("/srv/k",), processes=True, users=("app",), file="/p.yaml", agent_user="x"
    )
    doc = p.to_doc()
    check_payload("node-policy", doc)
    assert NodePolicy.from_doc(doc) == p
    assert normal("//srv/../etc/") == "/etc"
