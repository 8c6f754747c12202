"""``env: {X: {file: NAME}}`` secrets read by the real agent (subprocess, mosquitto, dockerd).

Only regular UTF-8 files of at most 64 KiB inside ``PHRAME_SECRETS_DIR`` are read: a FIFO
(which would block the agent), ``/dev/zero`` (which would never end), a link out of the
folder, ``../``, a binary, an oversize or a missing file each fail their own container with
an error in the status and the item; the other containers converge, and a valid secret
reaches the container's environment.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from node_agent.errors import ProcessError
from node_agent.processes import ProcessSupervisor
from tests.support import agent_support as spec
from tests.support.agent_support import ActualWatcher, AgentEnv, AgentProcess
from tests.support.services import wait_until

BAD = {
    "fifo": ("pipe", "a FIFO, not a regular file"),
    "zero": ("zero", "outside PHRAME_SECRETS_DIR"),  # a link to /dev/zero
    "devzero": ("/dev/zero", "outside PHRAME_SECRETS_DIR"),
    "link-out": ("shadow", "outside PHRAME_SECRETS_DIR"),
    "dotdot": ("../outside.txt", "outside PHRAME_SECRETS_DIR"),
    "binary": ("binary", "not UTF-8 text"),
    "oversize": ("big", "more than the 65536 allowed"),
    "missing": ("absent", "No such file or directory"),
    "folder": ("sub", "a directory, not a regular file"),
}


@pytest.fixture
def secrets(tmp_path: Path) -> Path:
    root = tmp_path / "secrets"
    root.mkdir()
    (root / "token").write_text("s3cret-✓\n")
    (root / "nested").mkdir()
    (root / "nested" / "key").write_text("inner")
    os.mkfifo(root / "pipe")  # nobody ever writes: opening it for reading would block
    (root / "zero").symlink_to("/dev/zero")
    (tmp_path / "outside.txt").write_text("not a secret")
    (root / "shadow").symlink_to(tmp_path / "outside.txt")
    (root / "binary").write_bytes(b"\xff\xfe\x00binary")
    (root / "big").write_text("x" * (64 * 1024 + 1))
    (root / "sub").mkdir()
    return root


@pytest.fixture
def agent(mosquitto, env: AgentEnv, tmp_path: Path, secrets: Path) -> Iterator[AgentProcess]:
    proc = AgentProcess(
        env.process_env(
            str(tmp_path / "state"), PHRAME_DESIRED_MQTT_URL=mosquitto.url, PHRAME_SECRETS_DIR=str(secrets)
        ),
        str(tmp_path / "agent.log"),
    )
    yield proc
    proc.terminate()


def _env_of(env: AgentEnv, name: str) -> dict[str, str]:
    pairs = env.get(name).attrs["Config"]["Env"] or []
    return dict(p.split("=", 1) for p in pairs)


@pytest.mark.slow
def test_only_regular_utf8_files_inside_the_secrets_dir_are_read(
    env: AgentEnv, watcher: ActualWatcher, agent: AgentProcess, secrets: Path
):
    good = env.container(
        "good",
        env={
            "TOKEN": {"file": "token"},
            "KEY": {"file": "nested/key"},
            "OLD": {"file": str(secrets / "token")},
        },
    )
    bad = [env.container(service, env={"S": {"file": name}}) for service, (name, _) in BAD.items()]
    watcher.publish(spec.topics_doc(env.node, [good, *bad]))

    def reported() -> bool:
        s = watcher.status() or {}
        return all(any(b["name"] in e for e in s.get("errors", [])) for b in bad)

    watcher.wait_for(reported, 60, what="an error for every bad secret")
    watcher.wait_for(lambda: (watcher.item("containers", good["name"]) or {}).get("state") == "running")
    values = _env_of(env, good["name"])
    assert values["TOKEN"] == "s3cret-✓" and values["KEY"] == "inner" and values["OLD"] == "s3cret-✓"

    errors = watcher.status()["errors"]
    for b, (service, (_, why)) in zip(bad, BAD.items(), strict=True):
        mine = [e for e in errors if b["name"] in e]
        assert mine and why in mine[0] and "env S" in mine[0], (service, mine)
        assert not env.exists(b["name"]), f"{service}: created although its secret is refused"
        watcher.wait_for(
            lambda b=b, why=why: (
                (watcher.item("containers", b["name"]) or {}).get("state") == "missing"
                and why in str(watcher.item("containers", b["name"]).get("error"))
            ),
            10,
            what=f"{service}: the item reported missing with its error",
        )
        assert "not a secret" not in mine[0]
    assert not watcher.status()["converged"]
    # the agent still answers: a pass later, it is online and the good item still runs
    assert agent.proc.poll() is None
    assert watcher.status()["state"] == "online"


def test_a_process_gets_its_secret_and_a_refused_one_fails_that_process_only(tmp_path: Path, secrets: Path):
    sup = ProcessSupervisor(tmp_path / "state", secrets_dir=secrets)
    out = tmp_path / "env.txt"
    script = f'echo "$TOKEN" > {out}; exec sleep 600'
    good = spec.process("e", "good", ["/bin/sh", "-c", script], env={"TOKEN": {"file": "token"}})
    bad = spec.process("e", "bad", ["/bin/sleep", "600"], env={"S": {"file": "pipe"}})
    try:
        sup.start(good)
        with pytest.raises(ProcessError, match=r"e\.bad\.0: .*env S: .*a FIFO, not a regular file"):
            sup.start(bad)
        wait_until(lambda: out.exists() and out.read_text() == "s3cret-✓\n", "the good process's secret", 10)
        observed = sup.check()
        assert observed["e.good.0"].state == "running"
        assert "FIFO" in str(observed["e.bad.0"].error) and observed["e.bad.0"].pid is None
    finally:
        for item_id in list(sup.check()):
            sup.stop(item_id)
