"""phrame/deploy over a real broker: agents' retained actual status decides the deploy status."""

from __future__ import annotations

import json
from pathlib import Path

from config_sync.gitlab_api import LocalReporter
from config_sync.service import ConfigSync
from schemas import Topics
from tests.integration.test_sync_support import SAMPLE, ConfigRemote, reader, settings_for
from tests.support.mosquitto import Mosquitto
from tests.support.services import eventually

T = Topics()


def deploy_states(service: ConfigSync, sha: str) -> list[tuple[str, str]]:
    return [
        (s["state"], s["description"])
        for s in service.reporter.snapshot()["statuses"]
        if s["name"] == "phrame/deploy" and s["sha"] == sha
    ]


def test_deploy_success_when_agents_report_the_commit_and_failed_after_timeout(
    tmp_path: Path, mosquitto: Mosquitto
) -> None:
    remote = ConfigRemote(tmp_path)
    first = remote.commit("sample", copy_from=SAMPLE)
    settings = settings_for(
        remote, tmp_path / "state", mosquitto.url, poll_s=3600, debounce_s=0, deploy_timeout_s=1.5
    )
    service = ConfigSync(settings, reporter=LocalReporter())
    service.start()
    try:
        assert service.queue.wait_idle(30)
        nodes = service.syncer.last["main"].changed_nodes
        assert nodes and deploy_states(service, first)[0][0] == "running"
        # the deploy waits for each node's published manifest generation (the first: 1)
        assert service.deployer.active["main"].nodes == {n: 1 for n in nodes}
        with reader(mosquitto.url, "fake-agents") as agents:
            agents.publish_batch(
                [
                    (
                        T.status(n),
                        json.dumps({"state": "online", "commit": first, "converged": True}).encode(),
                    )
                    for n in nodes
                ]
            )
            assert eventually(lambda: deploy_states(service, first)[-1][0] == "success")
            # next commit: one node reports an error and never converges
            second = remote.commit("drop egress", files={"environments/studio-a/services/egress.yaml": None})
            outcome = service.syncer.sync_ref("main")
            assert outcome.changed_nodes
            node = outcome.changed_nodes[0]
            bad = {"state": "online", "commit": first, "converged": False, "errors": ["cannot remove egress"]}
            agents.publish_batch([(T.status(node), json.dumps(bad).encode())])
            assert eventually(lambda: deploy_states(service, second)[-1][0] == "failed")
            assert deploy_states(service, second)[-1][1] == f"{node}: cannot remove egress"
    finally:
        service.stop()
