"""The reviewed plan stays the plan, over real HTTP, git and mosquitto (local git host).

Two merge requests change the same service (egress: one its grace period, the other its log
size) and are both reviewed: each note carries a plan digest, remembered retained in
``desired/reviews`` (so a config-sync restart between review and merge keeps it). The first
merges: its plan is the reviewed one, nothing is flagged. The second then merges: the merge
result's egress spec holds both changes, so its plan is not the reviewed one: ``phrame/deploy``
says ``plan changed since review``, the deploy record carries ``plan_changed`` and the note
is rewritten.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest

from config_sync.reporting import LocalReporter
from config_sync.service import ConfigSync
from schemas import Topics, check_payload
from tests.integration.test_sync_app import serving
from tests.integration.test_sync_deploy_records import deploys
from tests.support.mosquitto import Mosquitto
from tests.support.services import eventually
from tests.support.sync_support import SAMPLE, SECRET, ConfigRemote, desired_on_broker, reader, settings_for

T = Topics()
EGRESS = "environments/studio-a/services/egress.yaml"
TEXT = (SAMPLE / EGRESS).read_text()
GRACE = {EGRESS: TEXT.replace("stop_grace_period: 30s", "stop_grace_period: 40s")}
LOGS = {EGRESS: TEXT.replace("max-size: 50m", "max-size: 80m")}


def _hook(iid: int, branch: str, action: str, *, merged: str | None = None) -> bytes:
    attrs: dict[str, Any] = {"iid": iid, "action": action, "source_branch": branch, "target_branch": "main"}
    if merged:
        attrs["merge_commit_sha"] = merged
    return json.dumps({"object_kind": "merge_request", "object_attributes": attrs}).encode()


def _post(url: str, body: bytes) -> int:
    headers = {"X-Gitlab-Event": "Merge Request Hook", "X-Gitlab-Token": SECRET}
    headers["Content-Type"] = "application/json"
    return httpx.post(f"{url}/webhooks/gitlab", content=body, headers=headers, timeout=10).status_code


def _deploy_text(service: ConfigSync, sha: str) -> str:
    found = [
        s["description"]
        for s in service.reporter.snapshot()["statuses"]
        if s["name"] == "phrame/deploy" and s["sha"] == sha
    ]
    return found[-1] if found else ""


def _start(remote: ConfigRemote, tmp_path: Path, url: str) -> ConfigSync:
    settings = settings_for(remote, tmp_path / "state", url, webhook_secret=SECRET, poll_s=3600, debounce_s=0)
    return ConfigSync(settings, reporter=LocalReporter())


def _merge(remote: ConfigRemote, branch: str) -> str:
    work = remote.work
    work.git.checkout("-B", "main", "origin/main")
    work.git.merge("--no-ff", f"origin/{branch}", "-m", f"Merge branch '{branch}'")
    work.git.push("origin", "HEAD:refs/heads/main")
    return str(work.head.commit.hexsha)


@pytest.mark.slow
def test_a_merge_whose_plan_changed_since_review_is_flagged_and_one_without_interference_is_not(
    tmp_path: Path, mosquitto: Mosquitto
) -> None:
    remote = ConfigRemote(tmp_path)
    remote.commit("sample", copy_from=SAMPLE)
    first = _start(remote, tmp_path, mosquitto.url)
    with serving(first) as url:
        assert first.queue.wait_idle(30)
        remote.work.git.checkout("-B", "grace", "origin/main")
        remote.commit("egress: grace 40s", files=GRACE, branch="grace")
        remote.work.git.checkout("-B", "logs", "origin/main")
        remote.commit("egress: logs 80m", files=LOGS, branch="logs")
        assert _post(url, _hook(1, "grace", "open")) == 202
        assert _post(url, _hook(2, "logs", "open")) == 202
        assert first.queue.wait_idle(30)
        notes = first.reporter.snapshot()["plans"]
        reviewed = {iid: notes[str(iid)].split("Plan digest: `")[1].split("`")[0] for iid in (1, 2)}
        assert reviewed[1] != reviewed[2] and all(d.startswith("sha256:") for d in reviewed.values())
        with reader(mosquitto.url) as watch:
            raw = desired_on_broker(watch)[T.reviews()]
        doc = json.loads(raw)
        check_payload("desired-reviews", doc)
        assert {r["mr"]: r["digest"] for r in doc["reviews"]} == reviewed
        # phrame plan prints the same digest for the same change
        remote.work.git.checkout("-B", "grace", "origin/grace")
        plan = subprocess.run(
            [sys.executable, "-m", "phrame", "plan", str(remote.work_path), "--from", "origin/main", "--to", "grace"],
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert f"Plan digest: `{reviewed[1]}`" in plan.stdout, plan.stdout + plan.stderr
    first.stop()

    # a restart between the reviews and the merges: the reviewed digests are read back
    service = _start(remote, tmp_path, mosquitto.url)
    with serving(service) as url, reader(mosquitto.url) as watch:
        try:
            assert service.queue.wait_idle(30)
            merged_grace = _merge(remote, "grace")
            assert _post(url, _hook(1, "grace", "merge", merged=merged_grace)) == 202
            assert eventually(lambda: _deploy_text(service, merged_grace) != "", 15)
            merged_logs = _merge(remote, "logs")
            assert _post(url, _hook(2, "logs", "merge", merged=merged_logs)) == 202
            assert eventually(lambda: "plan changed since review" in _deploy_text(service, merged_logs), 15)
            assert service.queue.wait_idle(30)

            # the first merge had no interference: nothing flagged
            assert "plan changed" not in _deploy_text(service, merged_grace)
            notes = service.reporter.snapshot()["plans"]
            assert "1" not in notes  # its reviewed note stands as it was
            # the second: the record and the rewritten note say so
            note = notes["2"]
            assert "**Plan changed since review**" in note and reviewed[2] in note
            assert f"`{merged_logs[:12]}`" in note and "| change | container | `studio-a.egress.0` |" in note

            def records() -> dict[str, dict[str, Any]]:
                return {d["commit"]: d for d in deploys(watch)}

            assert eventually(lambda: "plan_changed" in records().get(merged_logs, {}), 10)
            flag = records()[merged_logs]["plan_changed"]
            assert flag["mr"] == 2 and flag["reviewed"] == reviewed[2] and flag["merged"] != reviewed[2]
            assert "plan_changed" not in records()[merged_grace]
        finally:
            service.stop()
