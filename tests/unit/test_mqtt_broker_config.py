"""The generated mosquitto configuration and ACL, checked as text (no broker)."""

from __future__ import annotations

from pathlib import Path

import pytest

from phrame.cli import main
from phrame.mqtt.broker_config import BrokerOptions, acl_text, mosquitto_conf
from phrame.mqtt.errors import SettingsError


def blocks(acl: str) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for block in acl.split("\n\n"):
        lines = [line for line in block.splitlines() if not line.startswith("#")]
        if lines:
            out[lines[0].removeprefix("user ")] = lines[1:]
    return out


def test_each_agent_gets_only_its_own_node() -> None:
    acl = blocks(acl_text(["b", "a"]))
    assert acl["node-a"] == [
        "topic read phrame/desired/nodes/a/#",
        "topic read phrame/cmd/nodes/a/#",
        "topic readwrite phrame/actual/nodes/a/#",
    ]
    assert not any("/nodes/b/" in line for line in acl["node-a"])


def test_service_accounts_get_what_they_need_and_no_more() -> None:
    acl = blocks(acl_text([], prefix="site1"))
    # config-sync also reads node statuses: phrame/deploy turns green from them
    assert acl["config-sync"] == [
        "topic readwrite site1/desired/#",
        "topic read site1/actual/nodes/+/status",
        "topic read site1/actual/nodes/+/heartbeat",
        "topic read site1/actual/nodes/+/containers/+",
    ]
    assert acl["placement"] == [
        "topic read site1/desired/#",
        "topic read site1/actual/#",
        "topic write site1/desired/environments/+/placement",
    ]
    assert acl["mirror-desired"] == ["topic read site1/desired/#"]
    assert acl["mirror-actual"] == ["topic read site1/actual/#"]
    assert "topic write site1/cmd/nodes/+/containers/+/restart" in acl["topic-api"]
    assert "topic write site1/cmd/nodes/+/containers/+/logs" in acl["topic-api"]
    assert not any("write" in line for line in acl["mirror-actual"] + acl["mirror-desired"])


@pytest.mark.parametrize("bad", [["a/b"], ["#"], ["A"], ["x\ntopic write #"]])
def test_node_names_that_could_widen_the_acl_are_refused(bad: list[str]) -> None:
    with pytest.raises(SettingsError, match="invalid node name"):
        acl_text(bad)


def test_bad_prefix_is_refused() -> None:
    with pytest.raises(SettingsError, match="prefix"):
        acl_text(["a"], prefix="phrame/#")


def test_config_has_tls_listeners_and_no_anonymous_access() -> None:
    conf = mosquitto_conf(BrokerOptions(bind="10.0.0.1", plain_port=1883, persistence_dir=None))
    assert "allow_anonymous false" in conf.splitlines()
    assert "acl_file /mosquitto/config/acl" in conf
    assert "listener 8883 10.0.0.1\nprotocol mqtt\ncafile /mosquitto/certs/ca.crt" in conf
    assert "listener 8443 10.0.0.1\nprotocol websockets\ncafile" in conf
    assert "listener 1883 127.0.0.1\nprotocol mqtt" in conf
    assert "persistence" not in conf
    assert conf.count("require_certificate false") == 2


def test_command_writes_both_files(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    repo = tmp_path / "repo"
    (repo / "nodes").mkdir(parents=True)
    (repo / "nodes" / "n1.yaml").write_text("name: n1\ncapacity: {cpus: 1, memory: 1Gi}\n")
    out = tmp_path / "out"
    assert main(["broker-config", "--inventory", str(repo), "--out", str(out),
                 "--prefix", "p", "--require-certificate"]) == 0  # fmt: skip
    assert "user node-n1\ntopic read p/desired/nodes/n1/#" in (out / "acl").read_text()
    assert "require_certificate true" in (out / "mosquitto.conf").read_text()
    assert str(out / "acl") in capsys.readouterr().out


def test_command_without_inventory_is_a_usage_error(tmp_path: Path) -> None:
    assert main(["broker-config", "--inventory", str(tmp_path), "--out", str(tmp_path / "o")]) == 2


def test_sample_example_in_compose_is_current(tmp_path: Path) -> None:
    root = Path(__file__).parents[2]
    sample, out = root / "compose" / "examples" / "mosquitto", tmp_path / "out"
    inventory = root / "fixtures" / "phrame-config"
    assert main(["broker-config", "--inventory", str(inventory), "--out", str(out)]) == 0
    for name in ("acl", "mosquitto.conf"):
        assert (sample / name).read_text() == (out / name).read_text(), f"regenerate {sample / name}"


def inventory(tmp_path: Path, *nodes: str) -> Path:
    repo = tmp_path / "repo"
    (repo / "nodes").mkdir(parents=True, exist_ok=True)
    for node in nodes:
        (repo / "nodes" / f"{node}.yaml").write_text(f"name: {node}\n")
    return repo


def test_a_file_it_did_not_write_is_kept_unless_forced(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--out pointed at a folder holding someone else's mosquitto.conf (the distribution's,
    a hand-written one, a generated one edited since) must not destroy it."""
    repo, out = inventory(tmp_path, "n1"), tmp_path / "out"
    out.mkdir()
    (out / "mosquitto.conf").write_text("listener 1883\nallow_anonymous true\n")
    args = ["broker-config", "--inventory", str(repo), "--out", str(out)]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert f"{out / 'mosquitto.conf'}" in err and "--force" in err
    assert (out / "mosquitto.conf").read_text() == "listener 1883\nallow_anonymous true\n"
    assert not (out / "acl").exists()  # nothing written when one file is refused
    assert main([*args, "--force"]) == 0
    assert "allow_anonymous false" in (out / "mosquitto.conf").read_text()


def test_its_own_unedited_output_is_regenerated(tmp_path: Path) -> None:
    repo, out = inventory(tmp_path, "n1"), tmp_path / "out"
    args = ["broker-config", "--inventory", str(repo), "--out", str(out)]
    assert main(args) == 0
    (repo / "nodes" / "n2.yaml").write_text("name: n2\n")
    assert main(args) == 0  # a new node: the same files, rewritten
    assert "user node-n2" in (out / "acl").read_text()
    with (out / "acl").open("a") as f:
        f.write("\nuser someone\ntopic readwrite #\n")  # an edit by hand
    assert main(args) == 2
    assert "user someone" in (out / "acl").read_text()


def test_every_listener_ties_the_client_id_to_the_user_name() -> None:
    """A node's password must not take over another account's client id."""
    conf = mosquitto_conf(BrokerOptions(plain_port=1883))
    listeners = conf.split("\nlistener ")[1:]
    assert len(listeners) == 3
    for listener in listeners:
        assert "\nuse_username_as_clientid true\n" in listener + "\n", listener


def test_observer_reads_both_planes_and_writes_nothing() -> None:
    acl = blocks(acl_text([]))
    assert acl["observer"] == ["topic read phrame/desired/#", "topic read phrame/actual/#"]


def test_a_whole_planes_burst_fits_the_brokers_queue():
    # mosquitto queues 1000 QoS 1 messages per client by default and drops the rest: a mirror
    # or config-sync reading a whole plane missed half of a 10,000-update burst
    assert "max_queued_messages 100000" in mosquitto_conf(BrokerOptions()).splitlines()


def test_an_unstamped_file_of_an_older_version_is_replaced_only_when_it_says_the_same(tmp_path: Path) -> None:
    """Files written before the stamp existed: unchanged ones (same inventory) are rewritten
    with the stamp; others are kept, as a file of unknown origin is."""
    repo, out = inventory(tmp_path, "n1"), tmp_path / "out"
    args = ["broker-config", "--inventory", str(repo), "--out", str(out)]
    assert main(args) == 0
    for name in ("acl", "mosquitto.conf"):  # as an older version wrote them
        (out / name).write_text((out / name).read_text().partition("\n")[2])
    assert main(args) == 0
    assert (out / "acl").read_text().startswith("# sha256 of the lines below")
    (out / "acl").write_text((out / "acl").read_text().partition("\n")[2])
    (repo / "nodes" / "n2.yaml").write_text("name: n2\n")
    assert main(args) == 2  # unstamped and no longer what this inventory gives
