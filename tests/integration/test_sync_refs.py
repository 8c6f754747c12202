"""Environments tracking different branches: each is published from its own ref's head.

A second environment ``studio-b`` tracks ``release``; config-sync discovers the ref from
``main``, gives it a worker and syncs it, and a change to ``studio-b`` on ``main`` alone
publishes nothing for it (real git remote, real mosquitto). A retired worker's last job
never stops the worker made since for the same ref.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path

from config_sync.publication.sender import SyncOutcome
from config_sync.reporting import LocalReporter
from config_sync.service import ConfigSync
from schemas import Topics
from tests.integration.test_sync_ownership import started_with_release
from tests.support.mosquitto import Mosquitto
from tests.support.services import eventually
from tests.support.sync_support import SAMPLE, ConfigRemote, desired_on_broker, reader, settings_for

T = Topics()
ENV_B = "name: studio-b\ntrack: release\nplacement: auto\n"
ON_MAIN = ENV_B.replace("track: release", "track: main")
ITEM = T.desired_item("edge-01", "containers", "studio-b.probe.0")


def service_b(image: str) -> str:
    return f"name: probe\nimage: {image}\nplacement:\n  node: edge-01\n"


def test_each_environment_follows_its_tracked_ref(tmp_path: Path, mosquitto: Mosquitto) -> None:
    remote = ConfigRemote(tmp_path)
    files = {
        "environments/studio-b/environment.yaml": ENV_B,
        "environments/studio-b/services/probe.yaml": service_b("probe:1"),
    }
    remote.commit("sample + studio-b", copy_from=SAMPLE, files=files)
    remote.work.git.push("origin", "HEAD:refs/heads/release")
    main_only = remote.commit(
        "probe:2 on main only", files={"environments/studio-b/services/probe.yaml": service_b("probe:2")}
    )
    settings = settings_for(remote, tmp_path / "state", mosquitto.url, poll_s=3600, debounce_s=0)
    service = ConfigSync(settings, reporter=LocalReporter())
    service.start()
    try:
        assert service.queue.wait_idle(30)
        assert service.tracked == {"main", "release"}
        assert set(service.queue.workers) == {"ref:main", "ref:release"}
        assert service.sync_counts == {"main": 1, "release": 1}
        item = T.desired_item("edge-01", "containers", "studio-b.probe.0")
        with reader(mosquitto.url) as client:
            published = desired_on_broker(client)
        assert json.loads(published[item])["image"] == "probe:1"  # from release, not main
        sync_a = json.loads(published[T.env_sync("studio-a")])
        sync_b = json.loads(published[T.env_sync("studio-b")])
        assert (sync_a["ref"], sync_a["commit"]) == ("main", main_only)
        assert sync_b["ref"] == "release" and sync_b["commit"] != main_only
        # edge-01's manifest names items of both environments
        manifest = json.loads(published[T.manifest("edge-01")])
        assert "containers/studio-b.probe.0" in manifest["items"]
        assert any(k.startswith("containers/studio-a.") for k in manifest["items"])
        # the release branch moves: only studio-b's item and edge-01's manifest change
        remote.work.git.checkout("-B", "release", "origin/release")
        remote.commit(
            "probe:3",
            branch="release",
            files={"environments/studio-b/services/probe.yaml": service_b("probe:3")},
        )
        outcome = service.syncer.sync_ref("release")
        sent = [t for t, _ in outcome.messages]
        assert sent == [
            T.env_service("studio-b", "probe"),
            item,
            T.manifest("edge-01"),
            T.env_sync("studio-b"),
        ]
        assert service.syncer.sync_ref("main").messages == []
    finally:
        service.stop()


def test_retracking_an_environment_never_clears_it_on_the_way(tmp_path: Path, mosquitto: Mosquitto) -> None:
    remote = ConfigRemote(tmp_path)
    env_on_main = ENV_B.replace("track: release", "track: main")
    files = {
        "environments/studio-b/environment.yaml": env_on_main,
        "environments/studio-b/services/probe.yaml": service_b("probe:1"),
    }
    remote.commit("sample + studio-b on main", copy_from=SAMPLE, files=files)
    settings = settings_for(remote, tmp_path / "state", mosquitto.url, poll_s=3600, debounce_s=0)
    service = ConfigSync(settings, reporter=LocalReporter())
    service.start()
    try:
        assert service.queue.wait_idle(30)
        item = T.desired_item("edge-01", "containers", "studio-b.probe.0")
        # studio-b moves to its own branch: the same content there, track: release on both
        moved = {"environments/studio-b/environment.yaml": ENV_B}
        remote.commit("studio-b follows release", files=moved)
        remote.work.git.push("origin", "HEAD:refs/heads/release")
        outcome = service.syncer.sync_ref("main")
        cleared = [t for t, payload in outcome.messages if payload is None]
        assert item not in cleared and not [t for t in cleared if "studio-b" in t]
        # the release worker takes it over: nothing of studio-b changes but its sync topic
        taken = service.syncer.sync_ref("release")
        assert [t for t, _ in taken.messages] == [T.env_sync("studio-b")]
        with reader(mosquitto.url) as client:
            published = desired_on_broker(client)
        assert json.loads(published[item])["image"] == "probe:1"
        assert json.loads(published[T.env_sync("studio-b")])["ref"] == "release"
    finally:
        service.stop()


def test_the_last_job_of_a_retired_worker_never_stops_the_new_one(
    tmp_path: Path, mosquitto: Mosquitto
) -> None:
    """release's worker is running a sync when main takes studio-b back (the worker is retired,
    its job goes on and finds release untracked) and hands it to release again (a new worker):
    the old job, finishing, must leave the new worker alone."""
    remote, service = started_with_release(tmp_path, mosquitto)
    old = service.queue.workers["ref:release"]
    real = service.syncer.sync_ref
    reached, go_sync, synced, go_on = (threading.Event() for _ in range(4))
    outcomes: list[SyncOutcome] = []

    def gated(ref: str) -> SyncOutcome:  # holds the old worker's job at two points
        if ref != "release" or not old.is_current():
            return real(ref)
        reached.set()
        go_sync.wait(30)
        outcomes.append(real(ref))
        synced.set()
        go_on.wait(30)
        return outcomes[-1]

    service.syncer.sync_ref = gated  # type: ignore[method-assign]
    try:
        assert service.trigger_sync("release") and reached.wait(30)
        remote.commit("studio-b back on main", files={"environments/studio-b/environment.yaml": ON_MAIN})
        service._sync("main")
        assert "ref:release" not in service.queue.workers  # retired, its job still running
        go_sync.set()
        assert synced.wait(30) and outcomes[0].tracked is False
        remote.commit("studio-b to release again", files={"environments/studio-b/environment.yaml": ENV_B})
        service._sync("main")
        assert service.queue.wait_idle(30)
        new = service.queue.workers["ref:release"]
        assert new is not old
        go_on.set()
        assert old.wait_idle(30)
        assert eventually(lambda: not old.is_alive())
        assert service.queue.workers.get("ref:release") is new and new.is_alive()
        remote.work.git.checkout("-B", "release", "origin/release")
        remote.commit(
            "probe:2",
            branch="release",
            files={"environments/studio-b/services/probe.yaml": service_b("probe:2")},
        )
        assert service.trigger_sync("release") and service.queue.wait_idle(30)
        with reader(mosquitto.url) as client:
            published = desired_on_broker(client)
        assert json.loads(published[ITEM])["image"] == "probe:2"
    finally:
        for event in (go_sync, go_on):
            event.set()
        service.stop()
