"""Merge-request previews through config-sync served by uvicorn, with a real bare git remote
and a real mosquitto: an MR hook publishes ``studio-a-mr-7``, an update moves it, a sync of
the default ref keeps it, a restart reads it back, close clears it, and the environment's
own items stay byte for byte as they were throughout."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from config_sync.reporting import LocalReporter
from config_sync.service import ConfigSync
from schemas import Topics
from schemas.registry import check_payload
from tests.integration.test_sync_app import Running, delivery, serving
from tests.support.mosquitto import Mosquitto
from tests.support.sync_support import SAMPLE, SECRET, ConfigRemote, desired_on_broker, reader, settings_for

T = Topics()
ENV_YAML = "environments/studio-a/environment.yaml"
PREVIEW = "preview:\n  nodes: {node: core-01}\n  services: [mixer]\n  auto_stop_h: 1\n"
MIXER = "environments/studio-a/services/mixer.yaml"
RECORD = T.env_preview("studio-a-mr-7")


def own(desired: dict[str, bytes]) -> dict[str, bytes]:
    """The environment's own items and declared services (manifests list previews too, and
    its ``sync`` and ``deploys`` topics move with the default ref's commits: not those)."""
    return {t: v for t, v in desired.items() if "/studio-a." in t or "/environments/studio-a/services/" in t}


def preview_items(desired: dict[str, bytes]) -> dict[str, bytes]:
    return {t: v for t, v in desired.items() if "studio-a-mr-7" in t and v}


@pytest.fixture
def with_preview(tmp_path: Path, mosquitto: Mosquitto) -> Iterator[Running]:
    remote = ConfigRemote(tmp_path)
    remote.commit("sample", copy_from=SAMPLE)
    remote.commit("studio-a: previews", files={ENV_YAML: (SAMPLE / ENV_YAML).read_text() + PREVIEW})
    settings = settings_for(remote, tmp_path / "state", mosquitto.url, webhook_secret=SECRET, poll_s=3600)
    service = ConfigSync(settings, reporter=LocalReporter())
    with serving(service) as url:
        r = Running(service, url, remote)
        r.idle()
        yield r
        r.http.close()


def branch_commit(remote: ConfigRemote, text: str) -> str:
    mixer = (SAMPLE / MIXER).read_text().replace("env:\n", f"env:\n  CHANGE: {text}\n", 1)
    return remote.commit(text, branch="feature/x", files={MIXER: mixer})


@pytest.mark.slow
def test_an_mr_deploys_moves_and_stops_its_preview_beside_the_environment(
    with_preview: Running, mosquitto: Mosquitto, tmp_path: Path
) -> None:
    r = with_preview
    with reader(mosquitto.url) as client:
        before = own(desired_on_broker(client))
        assert before and not preview_items(desired_on_broker(client))
        r.remote.work.git.checkout("-b", "feature/x")
        first = branch_commit(r.remote, "one")
        assert r.post("merge-request-open.json").status_code == 202
        r.idle()
        desired = desired_on_broker(client)
        items = preview_items(desired)
        containers = sorted(t.rsplit("/", 1)[1] for t in items if "/containers/" in t)
        assert containers == ["studio-a-mr-7.input-proc.0", "studio-a-mr-7.mixer.0"]
        assert all(t.startswith("phrame/desired/nodes/core-01/") for t in items if "/nodes/" in t)
        mixer = json.loads(items["phrame/desired/nodes/core-01/containers/studio-a-mr-7.mixer.0"])
        assert mixer["commit"] == first and mixer["env"]["CHANGE"] == "one"
        port = mixer["ports"][0]["host_port"]
        assert 20000 <= port <= 29999  # moved off 9100, the environment's own
        manifest = json.loads(desired[T.manifest("core-01")])
        assert "containers/studio-a-mr-7.mixer.0" in manifest["items"]
        record = json.loads(desired[RECORD])
        check_payload(T.parse(RECORD).schema_name, record)  # as the mirror and the topic API read it
        assert (record["state"], record["commit"], record["node"]) == ("deployed", first, "core-01")
        assert T.env_sync("studio-a-mr-7") not in desired  # no sync topic: no ref clears it as its own
        assert own(desired) == before  # byte for byte
        reporter = r.service.reporter
        assert isinstance(reporter, LocalReporter)
        note = reporter.memory.notes[7]
        assert "### Preview" in note and "**studio-a-mr-7** (deployed" in note
        assert f"`127.0.0.1:{port}` → mixer:9100/tcp" in note
        status = r.http.get("/status", headers={"Authorization": f"Bearer {SECRET}"}).json()
        assert status["previews"]["studio-a-mr-7"]["state"] == "deployed"

        # an update moves it to the new head; its address stays
        second = branch_commit(r.remote, "two")
        assert r.post("merge-request-update.json").status_code == 202
        r.idle()
        desired = desired_on_broker(client)
        mixer = json.loads(desired["phrame/desired/nodes/core-01/containers/studio-a-mr-7.mixer.0"])
        assert mixer["commit"] == second and mixer["ports"][0]["host_port"] == port
        assert json.loads(desired[RECORD])["commit"] == second
        assert own(desired) == before

        # the default ref's own publication keeps the preview (and the preview kept its items)
        r.remote.work.git.checkout("main")
        r.remote.commit("readme", files={"README.md": "changed\n"})
        assert r.service.trigger_sync("main")
        r.idle()
        desired = desired_on_broker(client)
        assert preview_items(desired) and own(desired) == before

    # a restart reads the preview back (its deadline with it) and publishes nothing new
    r.service.stop()
    again = ConfigSync(r.service.settings, reporter=LocalReporter())
    again.start()
    try:
        assert again.queue.wait_idle(30)
        assert again.previews.records["studio-a-mr-7"]["commit"] == second
        assert "reviews" in again.queue.names()  # the expiry poll runs for what was read back
        with reader(mosquitto.url) as client:
            assert preview_items(desired_on_broker(client))
            # close clears its items and record within seconds; the environment's own stay
            started = time.monotonic()
            assert again.trigger_preview_stop(7)
            assert again.queue.wait_idle(30)
            desired = desired_on_broker(client)
            assert time.monotonic() - started < 5
            assert not preview_items(desired) and RECORD not in desired
            manifest = json.loads(desired[T.manifest("core-01")])
            assert not any("studio-a-mr-7" in k for k in manifest["items"])
            assert own(desired) == before
    finally:
        again.stop()


@pytest.mark.slow
def test_a_close_heard_before_the_start_stops_the_preview_read_back_at_start(
    with_preview: Running, mosquitto: Mosquitto
) -> None:
    r = with_preview
    r.remote.work.git.checkout("-b", "feature/x")
    branch_commit(r.remote, "one")
    assert r.post("merge-request-open.json").status_code == 202
    r.idle()
    r.service.stop()
    again = ConfigSync(r.service.settings, reporter=LocalReporter())
    assert again.trigger_preview_stop(7)  # not started: kept until the records are read back
    again.start()
    try:
        assert again.queue.wait_idle(30)
        assert again.previews.records == {}
        with reader(mosquitto.url) as client:
            desired = desired_on_broker(client)
            assert not preview_items(desired) and RECORD not in desired
    finally:
        again.stop()


@pytest.mark.slow
def test_a_stale_preview_is_removed_by_the_expiry_poll_and_a_close_hook_stops_one(
    with_preview: Running, mosquitto: Mosquitto
) -> None:
    r = with_preview
    r.remote.work.git.checkout("-b", "feature/x")
    branch_commit(r.remote, "one")
    assert r.post("merge-request-open.json").status_code == 202
    r.idle()
    previews = r.service.previews
    assert previews.expire() == []  # an hour to go
    previews.clock = lambda: time.time() + 3601  # the worker's poll is the timer; its clock moves on
    assert r.service.queue.worker("reviews").trigger("expire-now", previews.expire)
    r.idle()
    with reader(mosquitto.url) as client:
        desired = desired_on_broker(client)
        assert not preview_items(desired) and RECORD not in desired
    previews.clock = time.time
    branch_commit(r.remote, "two")
    assert r.post("merge-request-update.json").status_code == 202
    r.idle()
    assert "studio-a-mr-7" in previews.records
    answer = r.post("merge-request-close.json")
    assert answer.status_code == 202 and answer.json()["mr"] == 7
    r.idle()
    with reader(mosquitto.url) as client:
        assert not preview_items(desired_on_broker(client))
    assert previews.records == {}
    # reopened (any review event), then merged: the preview goes and the target syncs as before
    branch_commit(r.remote, "three")
    assert r.post("merge-request-update.json", **{"Idempotency-Key": "again"}).status_code == 202
    r.idle()
    assert "studio-a-mr-7" in previews.records
    syncs = r.syncs
    answer = r.post("merge-request-merge.json")
    assert answer.status_code == 202 and answer.json()["ref"] == "main"
    r.idle()
    assert previews.records == {} and r.syncs == syncs + 1
    with reader(mosquitto.url) as client:
        assert not preview_items(desired_on_broker(client))


@pytest.mark.slow
def test_an_invalid_head_keeps_the_last_preview_and_a_forks_waits_for_an_approval_locally(
    with_preview: Running, mosquitto: Mosquitto
) -> None:
    r = with_preview
    r.remote.work.git.checkout("-b", "feature/x")
    first = branch_commit(r.remote, "one")
    assert r.post("merge-request-open.json").status_code == 202
    r.idle()
    mixer = (SAMPLE / MIXER).read_text().replace("replicas: 2", "replicas: two")
    r.remote.commit("broken", branch="feature/x", files={MIXER: mixer})
    assert r.post("merge-request-update.json").status_code == 202
    r.idle()
    record = r.service.previews.records["studio-a-mr-7"]
    check_payload("desired-preview", record)
    assert (record["state"], record["commit"]) == ("failed", first)
    assert record["reason"].startswith(f"the head does not validate ({MIXER}:")
    with reader(mosquitto.url) as client:
        mixer_item = json.loads(
            desired_on_broker(client)["phrame/desired/nodes/core-01/containers/studio-a-mr-7.mixer.0"]
        )
        assert mixer_item["commit"] == first  # the last preview stays
    reporter = r.service.reporter
    assert isinstance(reporter, LocalReporter)
    assert "**studio-a-mr-7** (failed, at" in reporter.memory.notes[7]

    # a merge request from a fork: held, as the local host has no approvals (what an approved
    # head left running stays until the merge request closes or goes stale)
    headers, raw = delivery("merge-request-update.json")
    body = json.loads(raw)
    body["object_attributes"]["source_project_id"] = 99
    headers["Idempotency-Key"] = "fork-local"
    assert r.http.post("/webhooks/gitlab", content=json.dumps(body), headers=headers).status_code == 202
    r.idle()
    record = r.service.previews.records["studio-a-mr-7"]
    assert record["state"] == "waiting-approval" and "the local git host holds it" in record["reason"]
    check_payload("desired-preview", record)
    assert "the local git host holds it" in reporter.memory.notes[7]

    # a target that does not validate cannot be trusted with its preview: blocks: nothing moves
    branch_commit(r.remote, "valid again")
    r.remote.work.git.checkout("main")
    r.remote.commit("break main", files={"nodes/core-01.yaml": "name: core-01\nbogus: 1\n"})
    assert r.post("merge-request-update.json", **{"Idempotency-Key": "target-broken"}).status_code == 202
    r.idle()
    assert r.service.previews.records["studio-a-mr-7"] == record
