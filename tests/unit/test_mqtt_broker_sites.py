"""Bridged brokers' generated text: a site's bridge block and ACL, the hub's bridge accounts,
and ``phrame broker-config --role site`` on a small inventory (no broker)."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from phrame.cli import main
from phrame.mqtt.broker_config import BrokerOptions
from phrame.mqtt.broker_sites import (
    BridgeOptions,
    bridge_block,
    hub_address,
    hub_bridge_acl,
    nodes_of_site,
    site_acl_text,
)
from phrame.mqtt.errors import SettingsError
from tests.unit.test_mqtt_broker_config import blocks

LABELS: dict[str, dict[str, object]] = {
    "a1": {"site": "a"},
    "a2": {"site": "a"},
    "b1": {"site": "b"},
    "x": {},
}


def test_a_site_is_the_nodes_with_its_label() -> None:
    assert nodes_of_site(LABELS, "a") == ["a1", "a2"]
    assert nodes_of_site({"n": {"loc": 7}}, "7", label="loc") == ["n"]  # labels compare as text
    with pytest.raises(SettingsError, match="no node in the inventory has the label site: c"):
        nodes_of_site(LABELS, "c")


def test_the_hub_lets_a_bridge_write_only_its_sites_actual_topics() -> None:
    acl = blocks(hub_bridge_acl({"a": ["a1"]}, "phrame").lstrip())
    assert acl == {"bridge-a": [
        "topic read phrame/desired/nodes/a1/#",
        "topic read phrame/cmd/nodes/a1/#",
        "topic write phrame/actual/nodes/a1/#",
    ]}  # fmt: skip
    assert hub_bridge_acl({}, "phrame") == ""


def test_the_site_acl_holds_its_agents_to_their_own_node() -> None:
    acl = blocks(site_acl_text("a", ["a1", "a2"], "phrame"))
    assert set(acl) == {"bridge-a", "observer", "node-a1", "node-a2"}
    assert acl["node-a1"][-1] == "topic readwrite phrame/actual/nodes/a1/#"
    assert not any("/a2/" in line for line in acl["node-a1"])
    assert all(line.startswith("topic read ") for line in acl["observer"])


def test_a_bridge_over_tls_carries_each_node_both_ways_at_qos_1() -> None:
    bridge = BridgeOptions("a", "mqtts://hub.example:18883", "s3cret")
    lines = bridge_block(bridge, ["a1"], BrokerOptions(tls_dir="/certs"))
    for wanted in ("connection bridge-a", "address hub.example:18883", "remote_username bridge-a",
                   "remote_password s3cret", "cleansession false", "try_private true",
                   "bridge_protocol_version mqttv311", "bridge_cafile /certs/ca.crt",
                   "bridge_insecure false", "topic phrame/desired/nodes/a1/# in 1",
                   "topic phrame/cmd/nodes/a1/# in 1", "topic phrame/actual/nodes/a1/# out 1"):  # fmt: skip
        assert wanted in lines, wanted
    plain = bridge_block(BridgeOptions("a", "mqtt://hub", "pw", "/ca.pem"), ["a1"], BrokerOptions())
    assert "address hub:1883" in plain and not any(x.startswith("bridge_cafile") for x in plain)


def test_bad_hub_urls_and_passwords_are_refused() -> None:
    assert hub_address("mqtts://[::1]:8883") == ("[::1]:8883", True)
    for url in ("wss://hub:8443", "hub:8883", "mqtts://"):
        with pytest.raises(SettingsError, match="--hub-url"):
            hub_address(url)
    with pytest.raises(SettingsError, match="one non-empty line"):
        bridge_block(BridgeOptions("a", "mqtts://hub", "two\nlines"), ["a1"], BrokerOptions())


def inventory(tmp_path: Path) -> Path:
    for node, site in (("a1", "a"), ("b1", "b")):
        (tmp_path / "repo" / "nodes").mkdir(parents=True, exist_ok=True)
        (tmp_path / "repo" / "nodes" / f"{node}.yaml").write_text(f"name: {node}\nlabels:\n  site: {site}\n")
    (tmp_path / "pw").write_text("s3cret\n")
    return tmp_path / "repo"


def test_the_command_writes_a_private_site_config(tmp_path: Path) -> None:
    repo, out = inventory(tmp_path), tmp_path / "site"
    args = ["broker-config", "--inventory", str(repo), "--out", str(out), "--role", "site", "--site", "a",
            "--hub-url", "mqtts://hub:8883", "--hub-password-file", str(tmp_path / "pw")]  # fmt: skip
    assert main(args) == 0
    conf = (out / "mosquitto.conf").read_text()
    assert "remote_password s3cret\n" in conf and "persistence true\n" in conf
    assert "/nodes/b1/" not in conf and "/nodes/b1/" not in (out / "acl").read_text()
    assert stat.S_IMODE((out / "mosquitto.conf").stat().st_mode) == 0o600
    assert main([*args[:-2]]) == 2  # no password file
    assert main([*args, "--persistence-dir", ""]) == 2  # a site keeps its store


def test_the_hub_gets_one_bridge_account_per_site(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    repo, out = inventory(tmp_path), tmp_path / "hub"
    assert (
        main(["broker-config", "--inventory", str(repo), "--out", str(out), "--site", "a", "--site", "b"])
        == 0
    )
    acl = blocks((out / "acl").read_text())
    assert {"bridge-a", "bridge-b", "node-a1", "node-b1", "config-sync"} <= set(acl)
    assert main(["broker-config", "--inventory", str(repo), "--out", str(out), "--site", "c"]) == 2
    assert "no node in the inventory has the label site: c" in capsys.readouterr().err
    assert main(["broker-config", "--inventory", str(repo), "--out", str(out), "--hub-url", "mqtts://h"]) == 2
    assert "are for --role site" in capsys.readouterr().err
