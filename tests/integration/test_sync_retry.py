"""config-sync retries a failed sync with backoff instead of waiting for the poll.

A real bare git remote goes away (renamed) and comes back: the sync that failed to fetch
is run again on its own, within seconds, although the poll is an hour away
(PHRAME_POLL_S=3600) and nothing triggers it. (A broker outage is no such test: the
reconnect itself triggers a sync; the backoff of a failed publication is unit-tested.)
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from config_sync.service import ConfigSync
from tests.integration.test_sync_publishing import SYNC
from tests.support.mosquitto import Mosquitto
from tests.support.services import wait_until
from tests.support.sync_support import SAMPLE, ConfigRemote, reader, running_sync, settings_for

TAMS = SAMPLE / "environments" / "studio-a" / "services" / "tams.yaml"
TAMS_V2 = TAMS.read_text().replace("tams:1.0.3", "tams:1.0.4")


@pytest.fixture
def remote(tmp_path: Path) -> ConfigRemote:
    return ConfigRemote.with_sample(tmp_path)


@pytest.fixture
def service(remote: ConfigRemote, tmp_path: Path, mosquitto: Mosquitto) -> Iterator[ConfigSync]:
    settings = settings_for(remote, tmp_path / "state", mosquitto.url, poll_s=3600, debounce_s=0)
    with running_sync(settings) as service:
        assert service.queue.wait_idle(30)
        yield service


def synced_commit(url: str) -> str | None:
    with reader(url) as client:
        raw = client.collect_retained(SYNC, settle=0.2).get(SYNC)
    return json.loads(raw)["commit"] if raw else None


@pytest.mark.slow
def test_a_sync_that_failed_on_an_unreachable_remote_is_retried_once_it_is_back(
    remote: ConfigRemote, service: ConfigSync, mosquitto: Mosquitto
) -> None:
    sha = remote.commit("tams 1.0.4", files={"environments/studio-a/services/tams.yaml": TAMS_V2})
    away = remote.bare_path.with_name("moved-away.git")
    remote.bare_path.rename(away)
    worker = service.queue.workers["ref:main"]
    assert service.trigger_sync("main")

    def retrying() -> dict[str, int]:
        return dict(service.status()["workers"]["ref:main"]["retrying"])

    wait_until(lambda: retrying().get("main", 0) >= 1, "the sync to fail and wait for a retry", timeout=30)
    assert "GitError" in str(worker.last_error)
    away.rename(remote.bare_path)
    # no trigger, and the poll is an hour away: only a retry publishes the new head
    wait_until(lambda: synced_commit(mosquitto.url) == sha, "the retried sync to publish", timeout=30)
    wait_until(lambda: retrying() == {}, "the backoff to reset after the success")


def sync_doc(url: str) -> dict | None:
    with reader(url) as client:
        raw = client.collect_retained(SYNC, settle=0.2).get(SYNC)
    return json.loads(raw) if raw else None


@pytest.mark.slow
def test_an_unreachable_remote_shows_in_the_sync_topic_and_clears_when_it_is_back(
    remote: ConfigRemote, service: ConfigSync, mosquitto: Mosquitto
) -> None:
    """The sync topic is what ``phrame status``, the topic API and the dashboard read: a fetch
    that fails must show there (not only in ``/status`` and the log), at the commit that still
    runs, with ``last_applied`` kept; the next successful fetch clears it."""
    before = sync_doc(mosquitto.url)
    assert before is not None and before["ok"] is True
    running = before["commit"]
    away = remote.bare_path.with_name("moved-away.git")
    remote.bare_path.rename(away)
    try:
        assert service.trigger_sync("main")
        wait_until(
            lambda: (sync_doc(mosquitto.url) or {}).get("ok") is False,
            "the sync topic to report the unreachable remote",
            timeout=30,
        )
        during = sync_doc(mosquitto.url)
        assert during is not None
        assert during["commit"] == running and during["last_applied"]["commit"] == running
        (error,) = during["errors"]
        assert error["rule"] == "git-unreachable"
        assert "cannot fetch" in error["message"] and "keeping the last good state" in error["message"]
    finally:
        away.rename(remote.bare_path)
    # no trigger, and the poll is an hour away: config-sync's own retry clears the report
    wait_until(lambda: (sync_doc(mosquitto.url) or {}).get("ok") is True, "the report to clear", timeout=30)
    after = sync_doc(mosquitto.url)
    assert after is not None and after["commit"] == running and after["errors"] == []
