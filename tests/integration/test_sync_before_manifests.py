"""config-sync's hook between a commit's items and its manifests, against a real mosquitto.

The fault suite stops config-sync at that point (tests/support/hooked_services.py); this
checks the point itself: the hook, handed to :class:`ConfigSync`, runs once per changed
commit with the items on the broker and the manifests not yet, and not when no item changed.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from config_sync.reporting import LocalReporter
from config_sync.service import ConfigSync
from schemas import Topics
from tests.support.mosquitto import Mosquitto
from tests.support.sync_support import ConfigRemote, desired_on_broker, reader, settings_for

T = Topics()
EGRESS = "environments/studio-a/services/egress.yaml"


class Recorder:
    """The hook: what the broker holds each time it is called."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.seen: list[dict[str, bytes]] = []

    def __call__(self) -> None:
        with reader(self.url, "hook-reader") as client:
            self.seen.append(desired_on_broker(client))


@pytest.fixture
def hooked(tmp_path: Path, mosquitto: Mosquitto) -> Iterator[tuple[ConfigRemote, ConfigSync, Recorder]]:
    remote = ConfigRemote.with_sample(tmp_path)
    hook = Recorder(mosquitto.url)
    settings = settings_for(remote, tmp_path / "state", mosquitto.url, poll_s=3600, debounce_s=0)
    svc = ConfigSync(settings, reporter=LocalReporter(), before_manifests=hook)
    svc.start()
    assert svc.queue.wait_idle(30)
    yield remote, svc, hook
    svc.stop()


def test_the_hook_sees_the_items_published_and_the_manifests_not_yet(
    hooked: tuple[ConfigRemote, ConfigSync, Recorder], mosquitto: Mosquitto
) -> None:
    remote, svc, hook = hooked
    assert len(hook.seen) == 1  # the first commit: every item is new
    with reader(mosquitto.url) as client:
        before = desired_on_broker(client)
    hook.seen.clear()
    assert svc.syncer.sync_ref("main").ok
    assert hook.seen == []  # nothing changed: no items, no manifests, no hook
    remote.commit("drop egress", files={EGRESS: None})
    outcome = svc.syncer.sync_ref("main")
    assert outcome.ok and outcome.changed_nodes
    (at_hook,) = hook.seen
    gone = [t for t in before if T.parse(t).service == "egress"]
    assert gone and not any(t in at_hook for t in gone)  # the clears are out
    for node in outcome.changed_nodes:  # the manifests are still the last commit's
        manifest = T.manifest(node)
        assert at_hook[manifest] == before[manifest]
        assert json.loads(at_hook[manifest])["generation"] < outcome.generations[node]
