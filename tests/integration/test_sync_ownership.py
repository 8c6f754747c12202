"""Which ref publishes an environment is the default ref's word alone (real git, real mosquitto).

``studio-b`` tracks ``release``, then ``main`` takes it back while ``release`` still says
``track: release``: after main's sync the release worker is gone and polls of both refs
publish nothing. A node added to ``nodes/`` on main only keeps its manifest whichever
ref syncs, and an environment main deletes is cleared although another ref published it
(also its last one). A ref publishes what main hands it though its own older tree says
``track: main``.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Mapping
from pathlib import Path

import pytest

from config_sync.reporting import LocalReporter
from config_sync.service import ConfigSync
from schemas import Topics
from tests.support.mosquitto import Mosquitto
from tests.support.sync_support import SAMPLE, ConfigRemote, desired_on_broker, reader, settings_for

T = Topics()
ENV_B = "name: studio-b\ntrack: release\nplacement: auto\n"
ITEM = T.desired_item("edge-01", "containers", "studio-b.probe.0")
NODE = "name: edge-04\ndescription: spare edge\nlabels:\n  role: spare\ncapacity:\n  cpus: 4\n  memory: 8Gi\n"


def service_b(image: str) -> str:
    return f"name: probe\nimage: {image}\nplacement:\n  node: edge-01\n"


def started_with_release(
    tmp_path: Path, mosquitto: Mosquitto, extra: Mapping[str, str | None] | None = None
) -> tuple[ConfigRemote, ConfigSync]:
    """The sample plus studio-b (probe:1) tracking ``release``, on both branches, synced."""
    remote = ConfigRemote(tmp_path)
    files = {
        "environments/studio-b/environment.yaml": ENV_B,
        "environments/studio-b/services/probe.yaml": service_b("probe:1"),
        **(extra or {}),
    }
    remote.commit("sample + studio-b on release", copy_from=SAMPLE, files=files)
    remote.work.git.push("origin", "HEAD:refs/heads/release")
    settings = settings_for(remote, tmp_path / "state", mosquitto.url, poll_s=3600, debounce_s=0)
    service = ConfigSync(settings, reporter=LocalReporter())
    service.start()
    assert service.queue.wait_idle(30)
    assert service.tracked == {"main", "release"}
    assert set(service.queue.workers) == {"ref:main", "ref:release"}
    return remote, service


def poll_both(service: ConfigSync, rounds: int = 3) -> int:
    """Run the poll job of each ref in turn (as PHRAME_POLL_S would); the messages sent."""
    before = service.publisher.messages_total
    for _ in range(rounds):
        service._sync("release")
        service._sync("main")
    return service.publisher.messages_total - before


def test_main_taking_an_environment_back_ends_the_release_worker(
    tmp_path: Path, mosquitto: Mosquitto
) -> None:
    remote, service = started_with_release(tmp_path, mosquitto)
    try:
        # main takes studio-b back with new content; release is left as it was
        back = {
            "environments/studio-b/environment.yaml": ENV_B.replace("track: release", "track: main"),
            "environments/studio-b/services/probe.yaml": service_b("probe:2"),
        }
        head = remote.commit("studio-b back on main", files=back)
        service._sync("main")
        assert service.queue.wait_idle(30)
        assert service.tracked == {"main"}
        assert "ref:release" not in service.queue.workers  # no worker, no poll
        assert service.trigger_sync("release") is False
        assert set(service.syncer.envs_by_ref) == {"main"}
        assert service.syncer.envs_by_ref["main"] == {"studio-a", "studio-b"}
        with reader(mosquitto.url) as client:
            published = desired_on_broker(client)
        assert json.loads(published[ITEM])["image"] == "probe:2"
        sync_b = json.loads(published[T.env_sync("studio-b")])
        assert (sync_b["ref"], sync_b["commit"]) == ("main", head)
        # a stray poll of release (a timer that fired before it was retired) and main's polls:
        # nothing flips any more
        assert poll_both(service) == 0
        assert service.syncer.sync_ref("release").tracked is False
        with reader(mosquitto.url) as client:
            assert desired_on_broker(client) == published
    finally:
        service.stop()


@pytest.mark.slow
def test_a_ref_still_tracked_never_publishes_what_main_took_back(
    tmp_path: Path, mosquitto: Mosquitto
) -> None:
    """release keeps studio-c, so it keeps syncing; its own tree still says studio-b tracks
    release, but main's word decides: studio-b is main's alone."""
    studio_c = {
        "environments/studio-c/environment.yaml": "name: studio-c\ntrack: release\nplacement: auto\n",
        "environments/studio-c/services/meter.yaml": "name: meter\nimage: meter:1\nplacement:\n  node: edge-02\n",
    }
    remote, service = started_with_release(tmp_path, mosquitto, studio_c)
    try:
        back = {
            "environments/studio-b/environment.yaml": ENV_B.replace("track: release", "track: main"),
            "environments/studio-b/services/probe.yaml": service_b("probe:2"),
        }
        remote.commit("studio-b back on main", files=back)
        service._sync("main")
        assert service.queue.wait_idle(30)
        assert service.tracked == {"main", "release"}
        assert service.syncer.envs_by_ref == {"main": {"studio-a", "studio-b"}, "release": {"studio-c"}}
        with reader(mosquitto.url) as client:
            published = desired_on_broker(client)
        assert json.loads(published[ITEM])["image"] == "probe:2"
        assert json.loads(published[T.env_sync("studio-c")])["ref"] == "release"
        assert poll_both(service) == 0
        with reader(mosquitto.url) as client:
            assert desired_on_broker(client) == published
    finally:
        service.stop()


def test_a_node_added_on_main_only_keeps_its_manifest(tmp_path: Path, mosquitto: Mosquitto) -> None:
    remote, service = started_with_release(tmp_path, mosquitto)
    try:
        remote.commit("a spare node, on main only", files={"nodes/edge-04.yaml": NODE})
        service._sync("main")
        assert service.queue.wait_idle(30)
        with reader(mosquitto.url) as client:
            published = desired_on_broker(client)
        assert json.loads(published[T.manifest("edge-04")])["items"] == {}
        # release's own nodes/ has no edge-04: its syncs must not clear the manifest
        assert service.syncer.sync_ref("release").messages == []
        assert poll_both(service) == 0
        with reader(mosquitto.url) as client:
            assert desired_on_broker(client) == published
    finally:
        service.stop()


def test_an_environment_main_deletes_is_cleared_though_release_published_it(
    tmp_path: Path, mosquitto: Mosquitto
) -> None:
    remote, service = started_with_release(tmp_path, mosquitto)
    try:
        gone = {
            "environments/studio-b/environment.yaml": None,
            "environments/studio-b/services/probe.yaml": None,
        }
        remote.commit("studio-b retired", files=gone)
        service._sync("main")
        assert service.queue.wait_idle(30)
        assert service.tracked == {"main"}
        with reader(mosquitto.url) as client:
            published = desired_on_broker(client)
        assert not [t for t in published if "studio-b" in t]
        assert "containers/studio-b.probe.0" not in json.loads(published[T.manifest("edge-01")])["items"]
        assert poll_both(service) == 0
    finally:
        service.stop()


@pytest.mark.slow
def test_a_ref_publishes_what_main_hands_it_though_its_own_tree_says_main(
    tmp_path: Path, mosquitto: Mosquitto
) -> None:
    """release was cut while studio-b said ``track: main``; main then hands studio-b over.
    release's own track: predates the hand-over: main's word alone decides."""
    remote = ConfigRemote(tmp_path)
    on_main = ENV_B.replace("track: release", "track: main")
    files = {
        "environments/studio-b/environment.yaml": on_main,
        "environments/studio-b/services/probe.yaml": service_b("probe:1"),
    }
    remote.commit("sample + studio-b on main", copy_from=SAMPLE, files=files)
    remote.work.git.push("origin", "HEAD:refs/heads/release")  # cut here: it says track: main
    settings = settings_for(remote, tmp_path / "state", mosquitto.url, poll_s=3600, debounce_s=0)
    service = ConfigSync(settings, reporter=LocalReporter())
    service.start()
    try:
        assert service.queue.wait_idle(30)
        remote.commit("hand studio-b to release", files={"environments/studio-b/environment.yaml": ENV_B})
        remote.work.git.checkout("-B", "release", "origin/release")
        head = remote.commit(
            "probe:2 on release",
            branch="release",
            files={"environments/studio-b/services/probe.yaml": service_b("probe:2")},
        )
        service._sync("main")
        assert service.queue.wait_idle(30)
        assert service.tracked == {"main", "release"}
        assert service.syncer.envs_by_ref == {"main": {"studio-a"}, "release": {"studio-b"}}
        with reader(mosquitto.url) as client:
            published = desired_on_broker(client)
        assert json.loads(published[ITEM])["image"] == "probe:2"
        sync_b = json.loads(published[T.env_sync("studio-b")])
        assert (sync_b["ref"], sync_b["commit"]) == ("release", head)
        assert poll_both(service) == 0
    finally:
        service.stop()


def test_main_deleting_its_last_environment_clears_what_release_published(
    tmp_path: Path, mosquitto: Mosquitto
) -> None:
    remote, service = started_with_release(tmp_path, mosquitto)
    try:
        shutil.rmtree(remote.work_path / "environments")
        remote.commit("retire every environment")
        service._sync("main")
        assert service.queue.wait_idle(30)
        assert service.tracked == {"main"} and "ref:release" not in service.queue.workers
        with reader(mosquitto.url) as client:
            published = desired_on_broker(client)
        assert not [t for t in published if "studio-" in t]
        manifests = {T.manifest(p.stem) for p in (SAMPLE / "nodes").glob("*.yaml")}
        assert set(published) == manifests  # the fleet stays, with nothing to run
        assert all(json.loads(published[t])["items"] == {} for t in manifests)
        assert poll_both(service) == 0
    finally:
        service.stop()
