"""``scripts/compose-secrets``: the compose stack's secrets, CA, broker certificate and passwd,
made for real (openssl, mosquitto_passwd) into a temporary compose folder; no Docker.

What the stack relies on: each file owned by the user that reads it (uid 10001 for the
services, 1883 for the broker) and nobody else; the certificate verifies against ca.crt for
the names services and agents dial; passwd holds every account; a second run replaces no
secret, so running containers keep working.
"""

from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path

import pytest

from tests.support.services import require, require_binary

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "compose-secrets"
ACCOUNTS = {
    "config-sync",
    "config-sync-standby",
    "placement",
    "mirror-desired",
    "mirror-actual",
    "topic-api",
    "observer",
}


@pytest.fixture
def made(tmp_path: Path) -> Path:
    require(os.geteuid() == 0, "needs root: the script gives files to uid 10001 and 1883")
    require_binary("openssl", "openssl")
    require_binary("mosquitto_passwd", "mosquitto")
    run(
        tmp_path,
        "--agent",
        "core-01",
        "--node",
        "edge-02",
        "--san",
        "broker.example.test",
        "--san",
        "10.0.0.5",
    )
    return tmp_path


def run(folder: Path, *args: str) -> str:
    done = subprocess.run(
        [str(SCRIPT), "--dir", str(folder), *args], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def owner_mode(path: Path) -> tuple[int, int]:
    st = path.stat()
    return st.st_uid, stat.S_IMODE(st.st_mode)


def test_each_file_belongs_to_the_user_that_reads_it(made: Path) -> None:
    secrets = made / "secrets"
    for name in ("config_sync_mqtt_password", "api_token", "webhook_secret", "node_agent_mqtt_password"):
        assert owner_mode(secrets / name) == (10001, 0o400), name
        assert len((secrets / name).read_text().strip()) == 48, name
    assert (secrets / "gitlab_token").read_text() == ""
    assert owner_mode(secrets / "mqtt-ca.key") == (0, 0o600)
    assert owner_mode(secrets / "nodes" / "edge-02") == (0, 0o400)
    assert (secrets / "nodes" / "core-01").read_text() == (secrets / "node_agent_mqtt_password").read_text()
    certs = made / "mosquitto" / "certs"
    assert owner_mode(certs / "server.key") == (1883, 0o400)
    assert owner_mode(made / "mosquitto" / "passwd") == (1883, 0o400)
    users = {line.split(":")[0] for line in (made / "mosquitto" / "passwd").read_text().splitlines()}
    assert users == ACCOUNTS | {"node-core-01", "node-edge-02"}
    assert "$7$" in (made / "mosquitto" / "passwd").read_text()  # hashed, no clear password


def test_the_certificate_verifies_for_the_names_clients_dial(made: Path) -> None:
    certs = made / "mosquitto" / "certs"
    for kind, name in (("-verify_hostname", "mosquitto"), ("-verify_hostname", "broker.example.test"),
                       ("-verify_ip", "127.0.0.1"), ("-verify_ip", "10.0.0.5")):  # fmt: skip
        done = subprocess.run(["openssl", "verify", "-CAfile", str(certs / "ca.crt"), kind, name,
                               str(certs / "server.crt")], capture_output=True, text=True)  # fmt: skip
        assert done.returncode == 0, f"{name}: {done.stdout}{done.stderr}"
    wrong = subprocess.run(["openssl", "verify", "-CAfile", str(certs / "ca.crt"), "-verify_hostname",
                            "elsewhere.example.test", str(certs / "server.crt")], capture_output=True)  # fmt: skip
    assert wrong.returncode != 0


def test_a_second_run_keeps_every_secret_and_adds_a_new_node(made: Path) -> None:
    before = {p: p.read_bytes() for p in (made / "secrets").rglob("*") if p.is_file()}
    before[made / "mosquitto" / "certs" / "server.crt"] = (
        made / "mosquitto" / "certs" / "server.crt"
    ).read_bytes()
    out = run(made, "--node", "edge-03")
    assert all(path.read_bytes() == data for path, data in before.items())
    assert "made" in out and "nodes/edge-03" in out
    assert "node-edge-03:" in (made / "mosquitto" / "passwd").read_text()


def test_a_bad_node_name_changes_nothing(tmp_path: Path) -> None:
    require(os.geteuid() == 0, "needs root")
    done = subprocess.run(
        [str(SCRIPT), "--dir", str(tmp_path), "--node", "Bad_Name"], capture_output=True, text=True
    )
    assert done.returncode == 1 and "invalid node name" in done.stderr
    assert list(tmp_path.iterdir()) == []
