"""phrame/deploy over a real broker: agents' retained actual status decides the deploy status,
and manifests are numbered above what agents applied, also after broker and service restarted."""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from pathlib import Path

import pytest

from config_sync.reporting import LocalReporter
from config_sync.service import ConfigSync
from schemas import Topics
from tests.support.mosquitto import Mosquitto
from tests.support.services import eventually
from tests.support.sync_support import SAMPLE, ConfigRemote, desired_on_broker, reader, settings_for

T = Topics()


def deploy_states(service: ConfigSync, sha: str) -> list[tuple[str, str]]:
    return [
        (s["state"], s["description"])
        for s in service.reporter.snapshot()["statuses"]
        if s["name"] == "phrame/deploy" and s["sha"] == sha
    ]


def converged_on(commit: str, generations: Mapping[str, int]) -> list[tuple[str, bytes | None]]:
    """Each node's retained status, converged on ``commit`` at its generation."""
    status = {"state": "online", "commit": commit, "converged": True}
    return [(T.status(n), json.dumps({**status, "generation": g}).encode()) for n, g in generations.items()]


@pytest.mark.slow
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


def test_generations_stay_above_what_agents_applied_after_broker_and_service_restart(
    tmp_path: Path, mosquitto: Mosquitto
) -> None:
    """The broker restarts without persistence and config-sync restarts in the same window:
    neither remembers the manifests, the agents do (their retained status, republished on
    reconnect). A commit landing meanwhile must not pass on their old generations."""
    remote = ConfigRemote(tmp_path)
    remote.commit("sample", copy_from=SAMPLE)
    settings = settings_for(
        remote, tmp_path / "state", mosquitto.url, poll_s=3600, debounce_s=0, deploy_timeout_s=60
    )
    one = ConfigSync(settings, reporter=LocalReporter())
    one.start()
    try:
        assert one.queue.wait_idle(30)
        applied = remote.commit("drop egress", files={"environments/studio-a/services/egress.yaml": None})
        one.syncer.sync_ref("main")
        generations = dict(one.publisher.generations)
    finally:
        one.stop()
    assert max(generations.values()) == 2  # the nodes egress ran on are a generation ahead
    mosquitto.restart()
    egress = (SAMPLE / "environments/studio-a/services/egress.yaml").read_text()
    new = remote.commit("egress back", files={"environments/studio-a/services/egress.yaml": egress})
    with reader(mosquitto.url, "fake-agents") as agents:
        agents.publish_batch(converged_on(applied, generations))
        two = ConfigSync(settings, reporter=LocalReporter())
        two.start()
        try:
            assert two.queue.wait_idle(30)
            two.deployer.check()
            assert deploy_states(two, new)[-1][0] == "running", "deployed before any agent applied it"
            deploy = two.deployer.active["main"]
            assert deploy.commit == new
            # every manifest went out again, each above what its agent applied
            assert deploy.nodes == {n: g + 1 for n, g in generations.items()}
            with reader(mosquitto.url) as client:
                published = desired_on_broker(client)
            manifests = {T.parse(t).node: json.loads(p) for t, p in published.items() if "/manifest" in t}
            assert {n: m["generation"] for n, m in manifests.items()} == deploy.nodes
            # agents applying the new generations is what finishes the deploy
            agents.publish_batch(converged_on(new, deploy.nodes))
            assert eventually(lambda: deploy_states(two, new)[-1][0] == "success")
            # and a later idle resync publishes nothing
            assert two.syncer.sync_ref("main").messages == []
        finally:
            two.stop()


def test_a_commit_that_changes_no_node_is_deployed_at_once(tmp_path: Path, mosquitto: Mosquitto) -> None:
    """A commit that changes nothing (no manifest published) got no
    phrame/deploy at all; it is a success at once, or, while the commit it builds on is
    still converging, it takes that deployment over."""
    remote = ConfigRemote(tmp_path)
    first = remote.commit("sample", copy_from=SAMPLE)
    settings = settings_for(remote, tmp_path / "state", mosquitto.url, poll_s=3600, debounce_s=0)
    service = ConfigSync(settings, reporter=LocalReporter())
    service.start()
    try:
        assert service.queue.wait_idle(30)
        generations = service.syncer.last["main"].generations
        with reader(mosquitto.url, "fake-agents") as agents:
            agents.publish_batch(converged_on(first, generations))
            assert eventually(lambda: deploy_states(service, first)[-1][0] == "success")
            notes = remote.commit("notes", files={"NOTES.md": "who to call\n"})
            outcome = service.syncer.sync_ref("main")
            assert outcome.ok and outcome.generations == {}
            assert deploy_states(service, notes) == [
                ("success", "nothing to change: no node's desired state changed")
            ]
            service.syncer.sync_ref("main")  # an idle poll of the same head says nothing again
            assert len(deploy_states(service, notes)) == 1

            # a change that is still converging, then a commit that changes nothing on top
            change = remote.commit("drop egress", files={"environments/studio-a/services/egress.yaml": None})
            pending = service.syncer.sync_ref("main").generations
            assert pending and deploy_states(service, change)[-1][0] == "running"
            typo = remote.commit("notes typo", files={"NOTES.md": "whom to call\n"})
            assert service.syncer.sync_ref("main").generations == {}
            assert deploy_states(service, change)[-1] == ("canceled", f"superseded by {typo[:12]}")
            assert deploy_states(service, typo)[-1][0] == "running"  # not deployed before its base is
            agents.publish_batch(converged_on(change, pending))
            assert eventually(lambda: deploy_states(service, typo)[-1][0] == "success")
    finally:
        service.stop()


def test_a_running_deploy_names_the_nodes_offline_by_their_heartbeat(
    tmp_path: Path, mosquitto: Mosquitto
) -> None:
    """Over a real broker: every node's retained heartbeat is 90 s old before
    config-sync starts (PHRAME_NODE_TIMEOUT_S 20): the running deploy names each offline;
    a node that beats again is only waited for; the deploy timeout still decides."""
    remote = ConfigRemote(tmp_path)
    first = remote.commit("sample", copy_from=SAMPLE)
    nodes = sorted(p.stem for p in (SAMPLE / "nodes").glob("*.yaml"))
    with reader(mosquitto.url, "fake-agents") as agents:
        agents.publish_batch([(T.heartbeat(n), heartbeat(time.time() - 90)) for n in nodes])
        settings = settings_for(
            remote, tmp_path / "state", mosquitto.url, poll_s=3600, debounce_s=0, deploy_timeout_s=60
        )
        service = ConfigSync(settings, reporter=LocalReporter())
        service.start()
        try:
            assert service.queue.wait_idle(30)
            waited = sorted(service.deployer.active["main"].nodes)
            assert waited, "the sample changed no node"
            state, text = deploy_states(service, first)[-1]
            assert state == "running" and text.startswith(
                f"waiting for {waited[0]} (offline: no heartbeat for "
            ), text
            assert text.count("(offline: no heartbeat for ") == len(waited), text
            agents.publish_batch([(T.heartbeat(waited[0]), heartbeat(time.time()))])
            assert eventually(
                lambda: deploy_states(service, first)[-1][1].startswith(f"waiting for {waited[0]}, ")
            )
            assert deploy_states(service, first)[-1][0] == "running"
        finally:
            service.stop()


def heartbeat(ts: float) -> bytes:
    host = dict.fromkeys(["cpu_percent", "load1", "mem_total", "mem_used", "disk_total", "disk_used"], 1)
    return json.dumps({"ts": ts, "seq": 1, "interval_s": 5, "host": host}).encode()
