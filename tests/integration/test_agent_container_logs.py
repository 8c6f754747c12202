"""A failing container's last lines travel with its actual item (real agent, mosquitto, dockerd).

A container that prints and exits again and again: its report carries the tail of its
output (stdout and stderr), the value of its secret env masked; a container that runs
well carries none.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.agent_support import ActualWatcher, AgentEnv, AgentProcess, topics_doc

SECRET = "hunter2-secret-value"


@pytest.mark.slow
def test_a_crashing_containers_report_carries_its_last_lines_with_secrets_masked(
    env: AgentEnv, watcher: ActualWatcher, mosquitto, tmp_path: Path
):
    secrets = tmp_path / "secrets"
    secrets.mkdir()
    (secrets / "db").write_text(SECRET + "\n")
    script = (
        'echo "starting $HOSTNAME"; echo "password is $DB_PASSWORD"; echo "boom: no database" >&2; exit 3'
    )
    crash = env.container("crash", command=["sh", "-c", script], env={"DB_PASSWORD": {"file": "db"}})
    calm = env.container("calm")
    watcher.publish(topics_doc(env.node, [crash, calm]))
    agent = AgentProcess(
        env.process_env(
            str(tmp_path / "state"), PHRAME_DESIRED_MQTT_URL=mosquitto.url, PHRAME_SECRETS_DIR=str(secrets)
        ),
        str(tmp_path / "agent.log"),
    )
    try:

        def tail() -> list[str]:
            logs = (watcher.item("containers", crash["name"]) or {}).get("logs") or {}
            return list(logs.get("lines") or [])

        watcher.wait_for(lambda: "boom: no database" in tail(), 30, "the crash's last lines in its report")
        lines = tail()
        assert "password is ***" in lines, lines
        assert not any(SECRET in line for line in lines), lines
        report = watcher.item("containers", crash["name"])
        assert SECRET not in str(report)
        assert "logs" not in (watcher.item("containers", calm["name"]) or {"logs": "no report"})
        assert SECRET not in agent.log()
    finally:
        agent.terminate()
