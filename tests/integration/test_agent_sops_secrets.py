"""``env: {X: {secret: file/key}}``: the real agent (subprocess, mosquitto, dockerd) decrypts a
real ``sops`` file with its ``PHRAME_AGE_KEY_FILE`` and the container's process has the value;
a file not encrypted for the node fails that item with an error that carries no value; no
report on the actual plane and no line of the agent's log carries a plaintext.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from node_agent.errors import ProcessError
from node_agent.processes import ProcessSupervisor
from node_agent.sops_secrets import SopsSecrets
from phrame.sops.keys import load as load_keys
from tests.support import agent_support as spec
from tests.support.agent_support import ActualWatcher, AgentEnv, AgentProcess
from tests.support.services import wait_until
from tests.support.sops import item_secrets, make_key, need_sops, sops_encrypt

PLAIN = "pl41n-db-p4ssw0rd"
OTHER = "n0t-f0r-th1s-n0de"


@pytest.fixture
def keys(tmp_path: Path) -> dict[str, tuple[Path, str]]:
    need_sops()
    return {name: make_key(tmp_path / "keys", name) for name in ("node", "elsewhere")}


@pytest.fixture
def agent(
    mosquitto, env: AgentEnv, tmp_path: Path, keys: dict[str, tuple[Path, str]]
) -> Iterator[AgentProcess]:
    proc = AgentProcess(
        env.process_env(
            str(tmp_path / "state"),
            PHRAME_DESIRED_MQTT_URL=mosquitto.url,
            PHRAME_AGE_KEY_FILE=str(keys["node"][0]),
        ),
        str(tmp_path / "agent.log"),
    )
    yield proc
    proc.terminate()


@pytest.mark.slow
def test_the_agent_decrypts_injects_and_never_reports_the_value(
    env: AgentEnv,
    watcher: ActualWatcher,
    agent: AgentProcess,
    keys: dict[str, tuple[Path, str]],
    tmp_path: Path,
) -> None:
    mine = sops_encrypt(
        {"db": {"password": PLAIN}, "port": 5432}, [keys["node"][1]], tmp_path / "db.sops.yaml"
    )
    theirs = sops_encrypt({"password": OTHER}, [keys["elsewhere"][1]], tmp_path / "other.sops.yaml")
    good = env.container(
        "good",
        env={"DB_PASSWORD": {"secret": "db/db/password"}, "DB_PORT": {"secret": "db/port"}},
        secrets={"db": item_secrets(mine, "db/password", "port")},
    )
    bad = env.container(
        "bad", env={"S": {"secret": "other/password"}}, secrets={"other": item_secrets(theirs, "password")}
    )
    # prints its secret and exits: the log tail sent with its report masks the value
    leaky = env.container(
        "leaky",
        command=["sh", "-c", 'echo "password is $DB_PASSWORD"; exit 3'],
        env={"DB_PASSWORD": {"secret": "db/db/password"}},
        secrets={"db": item_secrets(mine, "db/password")},
    )
    watcher.publish(spec.topics_doc(env.node, [good, bad, leaky]))

    watcher.wait_for(lambda: (watcher.item("containers", good["name"]) or {}).get("state") == "running", 60)
    watcher.wait_for(
        lambda: (
            "not encrypted for this node" in str((watcher.item("containers", bad["name"]) or {}).get("error"))
        ),
        30,
        what="the bad item's decryption error",
    )
    # the value as the container's own process sees it
    environ = env.get(good["name"]).exec_run(["cat", "/proc/1/environ"]).output.decode()
    values = dict(v.split("=", 1) for v in environ.split("\0") if "=" in v)
    assert values["DB_PASSWORD"] == PLAIN and values["DB_PORT"] == "5432"
    assert not env.exists(bad["name"])
    error = str(watcher.item("containers", bad["name"])["error"])
    assert "secret other/password" in error and "env S" in error

    watcher.wait_for(
        lambda: (
            "password is ***" in json.dumps((watcher.item("containers", leaky["name"]) or {}).get("logs"))
        ),
        30,
        what="the leaky container's masked log tail",
    )
    assert PLAIN in env.get(leaky["name"]).logs().decode()  # Docker's own log has it: the mask is ours
    reports = json.dumps(watcher.latest)
    assert PLAIN not in reports and OTHER not in reports
    assert any(bad["name"] in e for e in watcher.status()["errors"])
    log = agent.log()
    assert PLAIN not in log and OTHER not in log
    assert agent.proc.poll() is None


def test_the_agent_refuses_a_key_file_others_may_read(
    env: AgentEnv, tmp_path: Path, keys: dict[str, tuple[Path, str]]
):
    path = keys["node"][0]
    path.chmod(0o640)
    proc = AgentProcess(
        env.process_env(str(tmp_path / "state"), PHRAME_AGE_KEY_FILE=str(path)), str(tmp_path / "agent.log")
    )
    try:
        code = proc.proc.wait(30)
    finally:
        proc.terminate()  # an agent that did not refuse is stopped here, never left running
    assert code == 2
    log = proc.log()
    assert f"PHRAME_AGE_KEY_FILE {path} has mode 0640" in log and "chmod 600" in log
    assert "AGE-SECRET-KEY" not in log


def test_a_process_gets_its_sops_secret_and_one_it_cannot_decrypt_fails_that_process_only(
    tmp_path: Path, keys: dict[str, tuple[Path, str]]
) -> None:
    mine = sops_encrypt({"token": PLAIN}, [keys["node"][1]], tmp_path / "api.sops.yaml")
    theirs = sops_encrypt({"token": OTHER}, [keys["elsewhere"][1]], tmp_path / "other.sops.yaml")
    sup = ProcessSupervisor(tmp_path / "state", sops=SopsSecrets(load_keys(keys["node"][0])))
    out = tmp_path / "env.txt"
    good = spec.process(
        "e",
        "good",
        ["/bin/sh", "-c", f'echo "$TOKEN" > {out}; exec sleep 600'],
        env={"TOKEN": {"secret": "api/token"}},
        secrets={"api": item_secrets(mine, "token")},
    )
    bad = spec.process(
        "e",
        "bad",
        ["/bin/sleep", "600"],
        env={"S": {"secret": "other/token"}},
        secrets={"other": item_secrets(theirs, "token")},
    )
    try:
        sup.start(good)
        with pytest.raises(
            ProcessError, match=r"e\.bad\.0: .*env S: secret other/token: cannot decrypt"
        ) as refused:
            sup.start(bad)
        assert OTHER not in str(refused.value)
        wait_until(lambda: out.exists() and out.read_text() == PLAIN + "\n", "the good process's secret", 10)
        # the agent's record of the process (its state folder) holds the ciphertext only
        records = "".join(p.read_text() for p in (tmp_path / "state").rglob("meta.json"))
        assert "api/token" in records and PLAIN not in records
    finally:
        for item_id in list(sup.check()):
            sup.stop(item_id)
