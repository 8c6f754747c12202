"""config-sync across a broker restart that happens while a publication waits for PUBACKs.

The reconnect callback runs on paho's network thread, the only thread that can deliver
those PUBACKs: it must not wait for the publication, and what the restarted broker lost
(no persistence) must be published again by the next pass.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from config_sync.reporting import LocalReporter
from config_sync.service import ConfigSync
from tests.integration.test_sync_publishing import SYNC, cli_render, without_sync
from tests.support.mosquitto import Mosquitto
from tests.support.sync_support import SAMPLE, ConfigRemote, desired_on_broker, reader, settings_for
from tests.support.waiting import wait_for

SERVICE = "name: asset-cache\nimage: registry.studio.test/cache:1\nplacement:\n  node: core-01\n"


def unnumbered(topics: dict[str, Any]) -> dict[str, Any]:
    return {t: {k: v for k, v in doc.items() if k != "generation"} for t, doc in topics.items()}


@pytest.fixture
def synced(tmp_path: Path, mosquitto: Mosquitto) -> Iterator[tuple[ConfigSync, ConfigRemote]]:
    remote = ConfigRemote(tmp_path)
    remote.commit("sample", copy_from=SAMPLE)
    service = ConfigSync(
        settings_for(remote, tmp_path / "state", mosquitto.url, poll_s=3600, debounce_s=0),
        reporter=LocalReporter(),
    )
    service.start()
    assert service.queue.wait_idle(30)
    yield service, remote
    service.stop()


def test_broker_restart_during_a_publish_neither_blocks_nor_loses_topics(
    synced: tuple[ConfigSync, ConfigRemote], mosquitto: Mosquitto
) -> None:
    service, remote = synced
    mosquitto.kill()  # persistence off: every retained topic is gone with it
    wait_for(lambda: not service.mqtt.is_connected, "the service to see the broker gone", 10)
    sha = remote.commit("add", files={"environments/studio-a/services/asset-cache.yaml": SERVICE})
    assert service.trigger_sync("main")
    # the publication now holds the publisher's lock, waiting for PUBACKs of a dead broker
    wait_for(service.publisher._lock.locked, "the publication holding the publisher's lock", 10)
    started = time.monotonic()
    mosquitto.start()
    assert service.queue.wait_idle(60)
    took = time.monotonic() - started
    assert took < 15, f"the reconnect stalled the publication for {took:.1f} s"
    assert service.queue.workers["ref:main"].failures == 0
    with reader(mosquitto.url, "test-reader-2") as client:
        after = desired_on_broker(client)
    # the restarted broker holds the whole rendering again, not only the last diff
    # (every item again, at the new commit; manifests keep counting generations)
    assert unnumbered(without_sync(after)) == unnumbered(cli_render(remote.bare_path, sha))
    assert json.loads(after[SYNC])["last_applied"]["commit"] == sha
