"""phrame/deploy of a head an earlier config-sync published, after a restart or a takeover.

The instance that published a commit and reported it ``running`` may be gone before its
nodes converge (SIGKILLed, or an active replaced by its standby). The next instance finds
the head published already and publishes nothing; it follows that deployment again from
the ``deploys`` records, so ``phrame/deploy`` gets its verdict (and a local git host's
``/status`` shows it), and nothing is published twice.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from config_sync.reporting import LocalReporter
from config_sync.service import ConfigSync
from tests.integration.test_sync_deploy import converged_on, deploy_states
from tests.support.mosquitto import Mosquitto
from tests.support.services import eventually
from tests.support.sync_support import SAMPLE, ConfigRemote, reader, settings_for


@pytest.mark.slow  # two starts and a deploy: about 3 s on a loaded machine
def test_a_deployment_left_running_by_the_last_run_gets_its_verdict_from_the_next(
    tmp_path: Path, mosquitto: Mosquitto
) -> None:
    remote = ConfigRemote(tmp_path)
    first = remote.commit("sample", copy_from=SAMPLE)
    settings = settings_for(
        remote, tmp_path / "state", mosquitto.url, poll_s=3600, debounce_s=0, deploy_timeout_s=60
    )
    one = ConfigSync(settings, reporter=LocalReporter())
    one.start()
    try:
        assert one.queue.wait_idle(30)
        generations = dict(one.syncer.last["main"].generations)
        assert generations and deploy_states(one, first) == [("running", deploy_states(one, first)[0][1])]
    finally:
        one.stop()  # gone before any node converged: phrame/deploy stays "running" on the host
    two = ConfigSync(settings, reporter=LocalReporter())
    two.start()
    try:
        assert two.queue.wait_idle(30)
        assert two.syncer.last["main"].messages == []  # the head is published: nothing again
        with reader(mosquitto.url, "fake-agents") as agents:
            agents.publish_batch(converged_on(first, generations))
            assert eventually(lambda: [s for s, _ in deploy_states(two, first)] == ["success"])
        assert two.deployer.active == {}
    finally:
        two.stop()


def test_a_deployment_converged_before_the_restart_is_reported_again_without_running(
    tmp_path: Path, mosquitto: Mosquitto
) -> None:
    remote = ConfigRemote(tmp_path)
    first = remote.commit("sample", copy_from=SAMPLE)
    settings = settings_for(
        remote, tmp_path / "state", mosquitto.url, poll_s=3600, debounce_s=0, deploy_timeout_s=60
    )
    with reader(mosquitto.url, "fake-agents") as agents:
        one = ConfigSync(settings, reporter=LocalReporter())
        one.start()
        try:
            assert one.queue.wait_idle(30)
            generations = dict(one.syncer.last["main"].generations)
            agents.publish_batch(converged_on(first, generations))
            assert eventually(lambda: deploy_states(one, first)[-1][0] == "success")
        finally:
            one.stop()
        two = ConfigSync(settings, reporter=LocalReporter())
        two.start()
        try:
            assert two.queue.wait_idle(30)
            # the nodes' retained statuses say it converged: success at once, no "running" first
            assert eventually(lambda: deploy_states(two, first) != [])
            (only,) = deploy_states(two, first)
            assert only[0] == "success" and "converged" in only[1], only
        finally:
            two.stop()
