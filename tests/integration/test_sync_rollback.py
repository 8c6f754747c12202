"""Rollback as a revert commit, against a real broker, git remote and uvicorn (local git host).

``POST /environments/{env}/rollback`` (and ``phrame rollback``) makes one new commit on the
tracked branch whose ``environments/<env>/`` equals the folder at the target commit (default:
the previous successful deployment), pushed fast-forward; the sync of that head publishes the
earlier digests again. Refusals (not an ancestor, already identical, unknown environment,
wrong scope) change nothing and are audited.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import git
import httpx
import pytest

from config_sync.reporting import LocalReporter
from config_sync.service import ConfigSync
from phrame.auth import TokenStore
from schemas import Topics, check_payload
from tests.integration.test_sync_deploy_records import converged_on, egress_with, states
from tests.integration.test_sync_rollouts import serving
from tests.support.mosquitto import Mosquitto
from tests.support.services import eventually
from tests.support.sync_support import SAMPLE, SECRET, ConfigRemote, desired_on_broker, reader, settings_for

T = Topics()
ENV = "studio-a"
DEPLOYER, READER = "carol-deploy-token", "dave-read-token"
LEGACY = "environments/studio-a/services/ptp-monitor-legacy.yaml"
MONITOR = "environments/studio-a/services/ptp-monitor.yaml"


def _without_legacy() -> dict[str, str | None]:
    """The legacy monitor removed, and the new one no longer naming it."""
    text = (SAMPLE / MONITOR).read_text()
    assert "replaces: ptp-monitor-legacy\n" in text
    return {LEGACY: None, MONITOR: text.replace("replaces: ptp-monitor-legacy\n", "")}


def _digests(broker: dict[str, bytes]) -> dict[str, str]:
    """Every published container item of the environment: topic -> digest."""
    out = {}
    for topic, raw in broker.items():
        parsed = T.parse(topic)
        if parsed.kind == "containers" and parsed.plane == "desired" and parsed.environment == ENV and raw:
            out[topic] = json.loads(raw)["digest"]
    return out


def _rollback(url: str, token: str, body: dict[str, Any] | None) -> httpx.Response:
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
    content = json.dumps(body).encode() if body is not None else b""
    return httpx.post(f"{url}/environments/{ENV}/rollback", headers=headers, content=content, timeout=60)


def _tree(remote: ConfigRemote, sha: str, folder: str) -> dict[str, bytes]:
    with git.Repo(remote.bare_path) as repo:
        tree = repo.commit(sha).tree / folder
        return {str(b.path): b.data_stream.read() for b in tree.traverse() if isinstance(b, git.Blob)}


@pytest.mark.slow
def test_rollback_commits_a_revert_the_sync_deploys_it_and_refusals_change_nothing(
    tmp_path: Path, mosquitto: Mosquitto
) -> None:
    tokens = tmp_path / "tokens.yaml"
    TokenStore.of([("carol", ["deploy"], DEPLOYER), ("dave", ["read"], READER)], tokens)
    remote = ConfigRemote(tmp_path)
    first = remote.commit("sample", copy_from=SAMPLE)
    settings = settings_for(
        remote, tmp_path / "state", mosquitto.url, poll_s=3600, debounce_s=0, deploy_timeout_s=60,
        webhook_secret=SECRET, tokens_file=str(tokens),
    )  # fmt: skip
    service = ConfigSync(settings, reporter=LocalReporter())
    with (
        serving(service) as url,
        reader(mosquitto.url) as watch,
        reader(mosquitto.url, "fake-agents") as agents,
    ):
        try:
            assert eventually(lambda: service.queue.wait_idle(0.1) and service.syncer.last.get("main"), 30)
            agents.publish_batch(converged_on(first, service.syncer.last["main"].generations))
            assert eventually(lambda: states(watch) == [(first, "converged")], 15)
            before = _digests(desired_on_broker(watch))

            # nothing earlier to go back to yet
            early = _rollback(url, DEPLOYER, None)
            assert early.status_code == 409 and "no earlier successful deployment" in early.json()["error"]

            # the change to undo: egress's grace period, a service removed, and the README
            # (outside environments/: a rollback of studio-a keeps it)
            files: dict[str, str | None] = {**egress_with(45), **_without_legacy(), "README.md": "changed\n"}
            second = remote.commit("egress: grace 45s, legacy monitor gone", files=files)
            service.trigger_sync("main")
            assert eventually(lambda: states(watch)[0] == (second, "pending"), 15), service.syncer.last[
                "main"
            ].errors
            agents.publish_batch(converged_on(second, service.syncer.last["main"].generations))
            assert eventually(lambda: states(watch)[0] == (second, "converged"), 15)
            changed = _digests(desired_on_broker(watch))
            assert changed != before

            # refusals: a read token, an unknown environment, a commit not in the history
            assert _rollback(url, READER, None).status_code == 403
            assert _rollback(url, SECRET, None).status_code == 401
            unknown = httpx.post(
                f"{url}/environments/nowhere/rollback", headers={"Authorization": f"Bearer {DEPLOYER}"}
            )
            assert unknown.status_code == 404 and "no environment 'nowhere'" in unknown.json()["error"]
            elsewhere = remote.commit("a side branch", files={"README.md": "side\n"}, branch="side")
            remote.work.git.checkout("-B", "main", "origin/main")
            service.git.fetch()
            stray = _rollback(url, DEPLOYER, {"to": elsewhere})
            assert stray.status_code == 409 and "not an ancestor" in stray.json()["error"]
            assert _rollback(url, DEPLOYER, {"to": "zz"}).status_code == 400
            assert _rollback(url, DEPLOYER, {"to": first, "force": True}).status_code == 400
            assert service.git.head("main") == second  # nothing was written

            # the rollback (default: the previous successful deployment, the first commit)
            done = _rollback(url, DEPLOYER, None)
            assert done.status_code == 201, done.text
            answer = done.json()
            assert (answer["status"], answer["to"], answer["ref"]) == ("pushed", first, "main")
            assert sorted(answer["files"]) == sorted([LEGACY, MONITOR, *egress_with(45)])
            with git.Repo(remote.bare_path) as repo:
                head = repo.commit("main")
                assert head.hexsha == answer["commit"] and [p.hexsha for p in head.parents] == [second]
                assert head.message.startswith(f"Roll back {ENV} to {first[:12]} (sample)")
                assert repo.is_ancestor(second, head.hexsha)  # fast-forward: nothing rewritten
                assert (head.tree / "README.md").data_stream.read() == b"changed\n"
            assert _tree(remote, answer["commit"], f"environments/{ENV}") == _tree(
                remote, first, f"environments/{ENV}"
            )
            assert _tree(remote, answer["commit"], "nodes") == _tree(remote, second, "nodes")
            # auto-sync deploys the head: the published items are the first commit's again
            assert eventually(lambda: _digests(desired_on_broker(watch)) == before, 15)

            # identical already: refused
            again = _rollback(url, DEPLOYER, {"to": first[:10]})
            assert again.status_code == 409 and "already as at" in again.json()["error"]

            # forward again with the CLI, to the second commit: the legacy file is deleted again
            env = {**os.environ, "PHRAME_TOKEN": DEPLOYER}
            command = [sys.executable, "-m", "phrame", "rollback", ENV, "--to", second, "--url", url]
            cli = subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)
            assert cli.returncode == 0, cli.stdout + cli.stderr
            assert cli.stdout.startswith("201 ")
            third = json.loads(cli.stdout[4:])["commit"]
            assert LEGACY not in _tree(remote, third, f"environments/{ENV}")
            assert eventually(lambda: _digests(desired_on_broker(watch)) == changed, 15)

            def audited() -> list[dict[str, Any]]:
                raw = desired_on_broker(watch).get(T.audit("config-sync"))
                doc = json.loads(raw) if raw else {"entries": []}
                if raw:
                    check_payload("desired-audit", doc)
                return [e for e in doc["entries"] if e["action"] == "rollback"]

            assert eventually(lambda: sum(e["result"] == "accepted" for e in audited()) == 2, 10)
            accepted = [e for e in audited() if e["result"] == "accepted"]
            assert [(e["who"], e["target"], e["commit"], e["status"]) for e in accepted] == [
                ("carol", ENV, first, 201),
                ("carol", ENV, second, 201),
            ]
        finally:
            service.stop()
