"""Validator behaviour beyond one-rule fixtures: all errors in one run, positions,
messages that name the key, and references that do not cascade."""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path

from phrame.config_repo import Problem, load_directory, validate

SAMPLE = Path(__file__).resolve().parents[2] / "fixtures" / "phrame-config"


def problems_of(tmp_path: Path, files: dict[str, str]) -> list[Problem]:
    root = Path(tempfile.mkdtemp(dir=tmp_path)) / "repo"
    shutil.copytree(SAMPLE, root)
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if text:
            path.write_text(text)
        else:
            path.unlink()
    repo, read = load_directory(root)
    return validate(repo, read)


def test_all_errors_in_one_run_across_files(tmp_path: Path) -> None:
    found = problems_of(
        tmp_path,
        {
            "environments/studio-a/services/tams.yaml": "name: tams\nimage: t:1\nplacement:\n  node: nowhere\n",
            "environments/studio-a/networks/media.yaml": "name: media\ndriver: [bridge\n",
            "nodes/edge-03.yaml": "name: edge-03\ncapacity:\n  cpus: -1\n",
        },
    )
    rules = {(p.file.rsplit("/", 1)[-1], p.rule) for p in found}
    assert ("tams.yaml", "unknown-node") in rules
    assert ("media.yaml", "yaml-syntax") in rules
    assert ("edge-03.yaml", "schema") in rules


def test_unknown_key_points_at_the_key_and_lists_allowed(tmp_path: Path) -> None:
    text = "name: egress\nimage: e:1\nplacement:\n  node: core-01\ndepends_on: [tams]\nrestat: always\n"
    (p,) = problems_of(tmp_path, {"environments/studio-a/services/egress.yaml": text})
    assert (p.line, p.column, p.rule, p.path) == (6, 1, "schema", "/restat")
    assert "unknown key 'restat'" in p.message and "restart" in p.message


def test_nested_value_position_and_pointer(tmp_path: Path) -> None:
    text = "name: egress\nimage: e:1\nplacement:\n  node: core-01\nresources:\n  memory: lots\n"
    (p,) = problems_of(tmp_path, {"environments/studio-a/services/egress.yaml": text})
    assert (p.line, p.column, p.path) == (6, 11, "/resources/memory")
    assert "512Mi" in p.message  # the schema's description says what is allowed


def test_reserved_label_prefix_is_refused(tmp_path: Path) -> None:
    text = "name: egress\nimage: e:1\nplacement:\n  node: core-01\nlabels:\n  io.phrame.node: x\n"
    (p,) = problems_of(tmp_path, {"environments/studio-a/services/egress.yaml": text})
    assert p.rule == "schema" and "io.phrame.node" in p.message


def test_schema_invalid_node_is_not_reported_again_as_unknown(tmp_path: Path) -> None:
    found = problems_of(tmp_path, {"nodes/edge-01.yaml": "name: edge-01\ncordoned: maybe\n"})
    assert [p.rule for p in found] == ["schema"]


def test_empty_file_says_so(tmp_path: Path) -> None:
    (p,) = problems_of(tmp_path, {"nodes/spare.yaml": "# nothing yet\n"})
    assert p.file == "nodes/spare.yaml" and "empty" in p.message


def test_same_port_on_different_nodes_is_fine(tmp_path: Path) -> None:
    text = "name: extra\nimage: x:1\nplacement:\n  node: edge-02\nports: ['127.0.0.1:9001:80']\n"
    assert problems_of(tmp_path, {"environments/studio-a/services/extra.yaml": text}) == []


def test_udp_and_tcp_same_number_do_not_clash_but_wildcard_does(tmp_path: Path) -> None:
    udp = "name: extra\nimage: x:1\nplacement:\n  node: edge-01\nports: ['127.0.0.1:9001:80/udp']\n"
    assert problems_of(tmp_path, {"environments/studio-a/services/extra.yaml": udp}) == []
    wild = "name: extra\nimage: x:1\nplacement:\n  node: edge-01\nports: ['9001:80']\n"
    (p,) = problems_of(tmp_path, {"environments/studio-a/services/extra.yaml": wild})
    # reported once, on the later of the two in (environment, service) order
    assert (p.rule, p.file) == ("port-conflict", "environments/studio-a/services/input-proc.yaml")
    assert "host port 9001/tcp on node edge-01" in p.message and "studio-a.extra.0" in p.message


def test_label_placed_replicas_use_node_json_for_ports_and_capacity(tmp_path: Path) -> None:
    placement = json.loads((SAMPLE / "environments/studio-a/node.json").read_text())
    placement["assignments"]["mixer"] = ["edge-02", "edge-02"]
    found = problems_of(tmp_path, {"environments/studio-a/node.json": json.dumps(placement)})
    assert {p.rule for p in found} == {"port-conflict"}


def test_node_json_pointing_at_a_removed_node_is_not_an_error(tmp_path: Path) -> None:
    # placement moves the replica; until then the commit that removed the node stays valid
    placement = json.loads((SAMPLE / "environments/studio-a/node.json").read_text())
    placement["assignments"]["mixer"] = ["edge-02", "edge-99"]
    assert problems_of(tmp_path, {"environments/studio-a/node.json": json.dumps(placement)}) == []


def test_node_json_duplicate_key_is_refused(tmp_path: Path) -> None:
    text = (
        '{"schema": "phrame.placement/v1", "environment": "studio-a",\n "assignments": {}, "assignments": {}}'
    )
    (p,) = problems_of(tmp_path, {"environments/studio-a/node.json": text})
    assert (p.rule, p.line) == ("yaml-duplicate-key", 2)


def test_environment_name_must_match_folder(tmp_path: Path) -> None:
    text = "name: studio-b\ntrack: main\n"
    (p,) = problems_of(tmp_path, {"environments/studio-a/environment.yaml": text})
    assert (p.rule, p.line, p.column) == ("name-mismatch", 1, 7)


def test_replacing_a_process_is_refused(tmp_path: Path) -> None:
    text = "name: second\nkind: process\ncommand: [/bin/true]\nreplaces: ptp-monitor\nplacement:\n  node: edge-01\n"
    (p,) = problems_of(tmp_path, {"environments/studio-a/services/second.yaml": text})
    assert p.rule == "replaces-unknown" and "process" in p.message


def test_alias_within_limits_is_allowed(tmp_path: Path) -> None:
    text = "name: extra\nimage: x:1\nplacement:\n  node: edge-02\nenv: &common\n  A: '1'\nlabels: *common\n"
    assert problems_of(tmp_path, {"environments/studio-a/services/extra.yaml": text}) == []
