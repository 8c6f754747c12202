"""Protected environments and freezes through config-sync, with a real broker, git remote and uvicorn.

A push to a protected environment is validated but nothing of it is published until
``phrame approve`` (the real CLI) gives it its approvals, one of them given before a restart
of config-sync; the ``sync`` topic says ``suspended`` ``waiting-approval`` meanwhile and the
deploy record names the approvers. A freeze in force (the one of the commit last deployed)
holds a push and releases it by itself when its short window ends. With GitLab (canned over
real HTTP), the approvals of the merge request that merged the commit count, and a GitLab
outage only delays them.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from config_sync.reporting import GitLabReporter
from config_sync.service import ConfigSync
from phrame.auth import TokenStore
from phrame.mqtt import MqttClient
from schemas import Topics, check_payload
from tests.integration.test_sync_rollouts import remote, serving
from tests.support.canned_gitlab import PROJECT, CannedGitLab
from tests.support.mosquitto import Mosquitto
from tests.support.services import eventually
from tests.support.sync_support import SECRET, ConfigRemote, desired_on_broker, reader, settings_for
from tests.support.webhook_receiver import webhook_receiver

__all__ = ["remote"]  # the fixture, shared with the rollout tests

T = Topics()
ITEM = T.desired_item("n1", "containers", "prod.web.0")


def _files(image: str, environment: str) -> dict[str, str]:
    return {
        "nodes/n1.yaml": "name: n1\n",
        "environments/prod/environment.yaml": f"name: prod\n{environment}",
        "environments/prod/services/web.yaml": f"name: web\nimage: {image}\nplacement:\n  node: n1\n",
    }


def _doc(watch: MqttClient, topic: str, schema: str) -> dict[str, Any] | None:
    raw = desired_on_broker(watch).get(topic)
    if not raw:
        return None
    doc = json.loads(raw)
    check_payload(schema, doc)
    return dict(doc)


def _image(watch: MqttClient) -> str | None:
    doc = _doc(watch, ITEM, "desired-container")
    return None if doc is None else str(doc.get("image"))


def _approve(url: str, token_file: Path, env: str, commit: str) -> subprocess.CompletedProcess[str]:
    command = [
        sys.executable,
        "-m",
        "phrame",
        "approve",
        env,
        commit,
        "--url",
        url,
        "--token-file",
        str(token_file),
    ]
    return subprocess.run(command, env=dict(os.environ), capture_output=True, text=True, timeout=60)


def _sync(watch: MqttClient) -> dict[str, Any]:
    return _doc(watch, T.env_sync("prod"), "desired-sync") or {}


@pytest.mark.slow
def test_a_protected_environment_waits_for_its_approvals_across_a_restart(
    tmp_path: Path, mosquitto: Mosquitto, remote: ConfigRemote
) -> None:
    tokens = tmp_path / "tokens.yaml"
    TokenStore.of([("alice", ["deploy"], "alice-token"), ("bob", ["deploy"], "bob-token")], tokens)
    for name in ("alice", "bob"):
        (tmp_path / name).write_text(f"{name}-token\n")
    secrets = tmp_path / "notify-secrets"
    secrets.mkdir()
    notify = "notify:\n  - {name: ops, format: json, url_file: ops.url}\n"
    v1 = remote.commit("v1", files=_files("web:1", f"protected:\n  approvals: 2\n{notify}"))
    settings = settings_for(
        remote, tmp_path / "state", mosquitto.url, poll_s=3600, debounce_s=0, webhook_secret=SECRET,
        tokens_file=str(tokens), notify_secrets_dir=str(secrets),
    )  # fmt: skip
    with reader(mosquitto.url) as watch, webhook_receiver() as ops:
        ops.listen()
        (secrets / "ops.url").write_text(ops.url + "\n")
        service = ConfigSync(settings)
        with serving(service) as url:
            # the first deployment of an environment is judged by its own file: held
            assert eventually(lambda: _sync(watch).get("hold", {}).get("reason") == "waiting-approval", 30)
            assert _sync(watch)["commit"] == v1 and _sync(watch)["hold"]["state"] == "suspended"
            assert _image(watch) is None  # nothing of prod published
            # the environment's notify: targets hear of the hold, once
            assert eventually(lambda: ops.events() == ["suspended"], 10), ops.events()
            check_payload("notify-event", ops.received[0])
            assert "suspended (waiting-approval): 0/2 approvals" in ops.received[0]["reasons"][0]
            done = _approve(url, tmp_path / "alice", "prod", v1[:12])
            assert done.returncode == 0, done.stdout + done.stderr
            assert eventually(lambda: _sync(watch)["hold"]["approvals"]["by"] == ["alice"], 10)
            again = _approve(url, tmp_path / "alice", "prod", v1)  # the same holder: still one
            assert again.returncode == 0 and '"approvers":["alice"]' in again.stdout.replace(" ", "")
            assert _image(watch) is None
            stored = _doc(watch, T.env_approvals("prod"), "desired-approvals")
            assert stored is not None and [a["by"] for a in stored["approvals"]] == ["alice"]
        service = ConfigSync(settings)  # a restart: alice's approval is read back
        with serving(service) as url:
            assert eventually(lambda: service.approvals.snapshot().get("prod", {}).get("commit") == v1, 30)
            assert service.approvals.snapshot()["prod"]["approvals"]["by"] == ["alice"]
            assert ops.events() == ["suspended"]  # the hold was told before the restart: not again
            wrong = _approve(url, tmp_path / "bob", "prod", "0" * 12)
            assert wrong.returncode == 1 and "409" in wrong.stdout
            done = _approve(url, tmp_path / "bob", "prod", v1)
            assert done.returncode == 0, done.stdout + done.stderr
            assert eventually(lambda: _image(watch) == "web:1", 15)
            assert "hold" not in _sync(watch) and _sync(watch)["last_applied"]["commit"] == v1

            def record() -> dict[str, Any] | None:
                doc = _doc(watch, T.env_deploys("prod"), "desired-deploys")
                return doc["deploys"][0] if doc and doc["deploys"] else None

            assert eventually(lambda: record() is not None, 10)
            rec = record()
            assert rec is not None and rec["commit"] == v1
            assert [a["by"] for a in rec["approvals"]] == ["alice", "bob"]
            # a commit removing protected: is judged by the protection it removes
            v2 = remote.commit("v2", files=_files("web:2", notify))
            service.trigger_sync("main")
            assert eventually(lambda: _sync(watch).get("commit") == v2 and "hold" in _sync(watch), 30)
            assert _image(watch) == "web:1"
            # told once per held commit: v1 (not again after the restart), then v2
            assert eventually(lambda: len(ops.events()) == 2, 10), ops.events()
            assert [d["commit"] for d in ops.received] == [v1, v2]
            audit = json.loads(desired_on_broker(watch)[T.audit("config-sync")])
            approved = [e for e in audit["entries"] if e["action"] == "approve"]
            assert [(e["who"], e["result"]) for e in approved][-2:] == [
                ("bob", "refused"),
                ("bob", "accepted"),
            ]


def _rfc3339(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@pytest.mark.slow
def test_a_freeze_holds_a_push_until_its_window_ends(
    tmp_path: Path, mosquitto: Mosquitto, remote: ConfigRemote
) -> None:
    remote.commit("v1", files=_files("web:1", ""))
    settings = settings_for(
        remote, tmp_path / "state", mosquitto.url, poll_s=3600, debounce_s=0, webhook_secret=SECRET
    )
    with reader(mosquitto.url) as watch:
        service = ConfigSync(settings)
        with serving(service):
            assert eventually(lambda: _image(watch) == "web:1", 30)
            # the commit adding the freeze is judged by the last deployed one (none): it deploys
            start = float(int(time.time())) - 60  # in force already: v2 is not judged by its own file
            end = start + 70  # ten seconds from now: time for v2 to deploy and v3 to be held
            freeze = f'freeze:\n  - {{from: "{_rfc3339(start)}", to: "{_rfc3339(end)}"}}\n'
            v2 = remote.commit("v2", files=_files("web:2", freeze))
            service.trigger_sync("main")
            assert eventually(lambda: _image(watch) == "web:2", 15)
            v3 = remote.commit("v3", files=_files("web:3", freeze))
            service.trigger_sync("main")
            assert eventually(lambda: _sync(watch).get("commit") == v3, 15)
            hold = _sync(watch)["hold"]
            assert (hold["reason"], hold["until"]) == ("frozen", end) and time.time() < end, hold
            assert _image(watch) == "web:2" and _sync(watch)["last_applied"]["commit"] == v2
            # nothing pushes, nothing polls (poll_s=3600): config-sync wakes at the window's end
            assert eventually(lambda: _image(watch) == "web:3", 20)
            assert time.time() >= end
            assert "hold" not in _sync(watch) and _sync(watch)["last_applied"]["commit"] == v3


@pytest.mark.slow
def test_gitlab_merge_request_approvals_count_and_an_outage_loses_none(
    tmp_path: Path, mosquitto: Mosquitto, remote: ConfigRemote
) -> None:
    gitlab = CannedGitLab().start()
    try:
        v1 = remote.commit("v1", files=_files("web:1", "protected:\n  approvals: 1\n"))
        gitlab.merged[v1] = (12, "main")  # merged into main by !12, which carol approved
        gitlab.approved_by[12] = ["carol"]
        gitlab.approvals_down = True
        settings = settings_for(remote, tmp_path / "state", mosquitto.url, poll_s=3600, debounce_s=0)
        service = ConfigSync(settings, reporter=GitLabReporter(gitlab.url, "glpat-test", PROJECT))
        service.approvals.gitlab_retry_s = 0.3
        with reader(mosquitto.url) as watch:
            service.start()
            try:
                # GitLab away: not known yet, so held (and asked again), never deployed unapproved
                assert eventually(
                    lambda: _sync(watch).get("hold", {}).get("reason") == "waiting-approval", 30
                )
                assert eventually(lambda: len(gitlab.calls("GET", f"/commits/{v1}/merge_requests")) >= 2, 10)
                assert _image(watch) is None
                held = [
                    c for c in gitlab.calls("POST", f"/statuses/{v1}") if c["json"]["name"] == "phrame/deploy"
                ]
                assert (
                    held and "suspended (waiting-approval): 0/1 approvals" in held[-1]["json"]["description"]
                )
                gitlab.approvals_down = False  # back: its next ask finds carol's approval, no push needed
                assert eventually(lambda: _image(watch) == "web:1", 15)
                assert gitlab.calls("GET", "/merge_requests/12/approvals")

                def deploys() -> list[dict]:  # its record is published after the items
                    return list(
                        (_doc(watch, T.env_deploys("prod"), "desired-deploys") or {}).get("deploys") or []
                    )

                assert eventually(deploys, 10)
                assert [(a["by"], a["via"]) for a in deploys()[0]["approvals"]] == [("carol", "gitlab")]
            finally:
                service.stop()
    finally:
        gitlab.stop()
