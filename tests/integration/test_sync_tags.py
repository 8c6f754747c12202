"""An environment tracking a tag (``track: refs/tags/v1``, ``placement: review``).

Real git remote, real mosquitto, the app served by uvicorn: creating the tag publishes
the environment at the tag's commit, force-moving it plus a Tag Push Hook republishes at
the new commit, deleting it keeps the last good state and reports it; no pass fails and
no traceback is logged. The poll follows a moved tag without any hook.
"""

from __future__ import annotations

import json
import logging
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest

from config_sync.reporting import LocalReporter
from config_sync.service import ConfigSync
from schemas import Topics
from tests.integration.test_sync_app import serving
from tests.support.mosquitto import Mosquitto
from tests.support.services import eventually
from tests.support.sync_support import (
    SAMPLE,
    SECRET,
    ConfigRemote,
    desired_on_broker,
    reader,
    settings_for,
)

T = Topics()
TAG = "refs/tags/v1"
ENV_T = "name: studio-t\ntrack: refs/tags/v1\nplacement: review\n"
ITEM = T.desired_item("edge-01", "containers", "studio-t.probe.0")
PROBE = "environments/studio-t/services/probe.yaml"
ZERO = "0" * 40


def probe(image: str) -> str:
    return f"name: probe\nimage: {image}\nplacement:\n  node: edge-01\n"


def tag_push(before: str, after: str) -> dict[str, Any]:
    """The fields of GitLab's Tag Push Hook that config-sync reads (deletion: ``checkout_sha`` null)."""
    deleted = after == ZERO
    return {
        "object_kind": "tag_push",
        "event_name": "tag_push",
        "before": before,
        "after": after,
        "ref": TAG,
        "checkout_sha": None if deleted else after,
        "commits": [],
        "total_commits_count": 0,
    }


def post_tag_push(http: httpx.Client, body: dict[str, Any]) -> httpx.Response:
    headers = {
        "X-Gitlab-Token": SECRET,
        "X-Gitlab-Event": "Tag Push Hook",
        "Content-Type": "application/json",
        "Idempotency-Key": str(uuid.uuid4()),  # one per delivery, as GitLab sends
    }
    return http.post("/webhooks/gitlab", content=json.dumps(body).encode(), headers=headers)


def published(url: str) -> dict[str, bytes]:
    with reader(url) as client:
        return desired_on_broker(client)


def image_on_broker(url: str) -> str | None:
    # One read takes what arrives within 0.2 s of the SUBACK: on an overloaded machine (seen
    # at load 50 on 2 cores) the replay can come later, so the tests poll for a value.
    raw = published(url).get(ITEM)
    return json.loads(raw)["image"] if raw else None


def statuses(service: ConfigSync, sha: str) -> dict[str, str]:
    snap = service.reporter.snapshot()["statuses"]
    return {s["name"]: s["state"] for s in snap if s["sha"] == sha}


@pytest.fixture
def remote(tmp_path: Path) -> ConfigRemote:
    remote = ConfigRemote(tmp_path)
    remote.commit(
        "sample + studio-t tracking refs/tags/v1",
        copy_from=SAMPLE,
        files={"environments/studio-t/environment.yaml": ENV_T, PROBE: probe("probe:1")},
    )
    return remote


@pytest.mark.slow
def test_a_tag_tracked_environment_follows_its_tag(
    tmp_path: Path, remote: ConfigRemote, mosquitto: Mosquitto, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    settings = settings_for(
        remote, tmp_path / "state", mosquitto.url, webhook_secret=SECRET, poll_s=3600, debounce_s=0
    )
    service = ConfigSync(settings, reporter=LocalReporter())
    with serving(service) as url, httpx.Client(base_url=url, timeout=10) as http:
        assert service.queue.wait_idle(30)
        assert service.tracked == {"main", TAG}
        assert image_on_broker(mosquitto.url) is None  # no tag yet: nothing to deploy

        # create the tag: its commit is published
        first = remote.work.head.commit.hexsha
        remote.work.git.tag("v1", first)
        remote.work.git.push("origin", "refs/tags/v1")
        assert post_tag_push(http, tag_push(ZERO, first)).status_code == 202
        assert service.queue.wait_idle(30)
        assert eventually(lambda: image_on_broker(mosquitto.url) == "probe:1", timeout=10)
        sync = json.loads(published(mosquitto.url)[T.env_sync("studio-t")])
        assert (sync["ref"], sync["commit"], sync["ok"]) == (TAG, first, True)
        assert statuses(service, first)["phrame/validate"] == "success"
        assert "phrame/deploy" in statuses(service, first)

        # move the tag to a new commit (a release): republished at that commit
        second = remote.commit("probe:2", files={PROBE: probe("probe:2")})
        remote.work.git.tag("-f", "v1", second)
        remote.work.git.push("--force", "origin", "refs/tags/v1")
        assert post_tag_push(http, tag_push(first, second)).status_code == 202
        assert service.queue.wait_idle(30)
        assert eventually(lambda: image_on_broker(mosquitto.url) == "probe:2", timeout=10)
        sync = json.loads(published(mosquitto.url)[T.env_sync("studio-t")])
        assert (sync["commit"], sync["ok"]) == (second, True)
        assert statuses(service, second)["phrame/validate"] == "success"

        # delete the tag: the last good state stays, and the sync topic says why
        remote.work.git.push("origin", ":refs/tags/v1")
        assert post_tag_push(http, tag_push(second, ZERO)).status_code == 202
        assert service.queue.wait_idle(30)
        assert eventually(lambda: image_on_broker(mosquitto.url) == "probe:2", timeout=10)
        sync = json.loads(published(mosquitto.url)[T.env_sync("studio-t")])
        assert sync["ok"] is False and sync["last_applied"]["commit"] == second
        assert "refs/tags/v1" in sync["errors"][0]["message"]
        status = http.get("/status", headers={"Authorization": f"Bearer {SECRET}"}).json()
        assert status["workers"][f"ref:{TAG}"]["failures"] == 0
        assert status["last_sync"][TAG]["ok"] is False

        # re-created at another commit: deployed again
        remote.work.git.tag("-f", "v1", first)
        remote.work.git.push("origin", "refs/tags/v1")
        assert post_tag_push(http, tag_push(ZERO, first)).status_code == 202
        assert service.queue.wait_idle(30)
        assert eventually(lambda: image_on_broker(mosquitto.url) == "probe:1", timeout=10)
        status = http.get("/status", headers={"Authorization": f"Bearer {SECRET}"}).json()
        assert status["workers"][f"ref:{TAG}"]["failures"] == 0
    assert [r.getMessage() for r in caplog.records if r.exc_info] == []


def test_the_poll_follows_a_moved_tag(tmp_path: Path, remote: ConfigRemote, mosquitto: Mosquitto) -> None:
    first = remote.work.head.commit.hexsha
    remote.work.git.tag("v1", first)
    remote.work.git.push("origin", "refs/tags/v1")
    settings = settings_for(remote, tmp_path / "state", mosquitto.url, poll_s=0.5, debounce_s=0)
    service = ConfigSync(settings, reporter=LocalReporter())
    service.start()
    try:
        assert eventually(lambda: image_on_broker(mosquitto.url) == "probe:1", timeout=30)
        second = remote.commit("probe:2", files={PROBE: probe("probe:2")})
        remote.work.git.tag("-f", "v1", second)
        remote.work.git.push("--force", "origin", "refs/tags/v1")
        assert eventually(lambda: image_on_broker(mosquitto.url) == "probe:2", timeout=30), "not polled"
        assert service.queue.workers[f"ref:{TAG}"].failures == 0
    finally:
        service.stop()
