"""The ``deploys`` topic on a real broker with a real git remote: a record per
published commit with author and message read from git, converged / failed / superseded
as the agents' retained statuses say, at most 20, kept across a config-sync restart."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from config_sync.reporting import LocalReporter
from config_sync.service import ConfigSync
from phrame.mqtt import MqttClient
from schemas import Topics, check_payload
from tests.integration.test_status_cli import run_status
from tests.support.mosquitto import Mosquitto
from tests.support.services import eventually
from tests.support.sync_support import SAMPLE, ConfigRemote, reader, settings_for

T = Topics()
ENV = "studio-a"
EGRESS = "environments/studio-a/services/egress.yaml"


def deploys(client: MqttClient) -> list[dict[str, Any]]:
    """The environment's retained deployments, schema-checked, newest first."""
    raw = client.collect_retained(T.env_deploys(ENV), settle=0.1).get(T.env_deploys(ENV))
    if not raw:
        return []
    doc = json.loads(raw)
    check_payload("desired-deploys", doc)
    assert doc["environment"] == ENV
    return list(doc["deploys"])


def states(client: MqttClient) -> list[tuple[str, str]]:
    return [(d["commit"], d["state"]) for d in deploys(client)]


def converged_on(commit: str, generations: Mapping[str, int]) -> list[tuple[str, bytes | None]]:
    status = {"state": "online", "commit": commit, "converged": True}
    return [(T.status(n), json.dumps({**status, "generation": g}).encode()) for n, g in generations.items()]


def egress_with(grace_s: int) -> dict[str, str]:
    """The sample's egress with another stop grace period: a change of its one node."""
    text = (SAMPLE / EGRESS).read_text()
    assert "stop_grace_period: 30s" in text
    return {EGRESS: text.replace("stop_grace_period: 30s", f"stop_grace_period: {grace_s}s")}


def start(remote: ConfigRemote, tmp_path: Path, url: str, **kw: Any) -> ConfigSync:
    settings = settings_for(remote, tmp_path / "state", url, poll_s=3600, debounce_s=0, **kw)
    service = ConfigSync(settings, reporter=LocalReporter())
    service.start()
    assert service.queue.wait_idle(30)
    return service


@pytest.mark.slow
def test_records_follow_the_agents_and_name_the_commit_from_git(tmp_path: Path, mosquitto: Mosquitto) -> None:
    remote = ConfigRemote(tmp_path)
    first = remote.commit("sample", copy_from=SAMPLE)
    service = start(remote, tmp_path, mosquitto.url, deploy_timeout_s=2)
    try:
        generations = service.syncer.last["main"].generations
        with reader(mosquitto.url) as client, reader(mosquitto.url, "fake-agents") as agents:
            assert eventually(lambda: states(client) == [(first, "pending")])
            (record,) = deploys(client)
            assert (record["ref"], record["author"], record["message"]) == (
                "main",
                "Test Ops <ops@example.test>",
                "sample",
            )
            assert record["nodes"] == generations and record["finished_at"] is None
            agents.publish_batch(converged_on(first, generations))
            assert eventually(lambda: states(client) == [(first, "converged")])
            done = deploys(client)[0]
            assert done["duration_s"] == round(done["finished_at"] - done["published_at"], 3) >= 0

            # two commits in a row: the first of them is superseded before it converged
            second = remote.commit("egress: grace 30s", files=egress_with(31))
            service.syncer.sync_ref("main")
            third = remote.commit("egress: grace 32s\nsecond line", files=egress_with(32))
            outcome = service.syncer.sync_ref("main")
            assert eventually(
                lambda: states(client) == [(third, "pending"), (second, "superseded"), (first, "converged")]
            )
            assert deploys(client)[0]["message"] == "egress: grace 32s"
            # the node never converges on the third: failed after PHRAME_DEPLOY_TIMEOUT_S, naming it
            (node,) = outcome.changed_nodes
            bad = {"state": "online", "converged": False, "generation": 1, "errors": ["cannot pull egress"]}
            agents.publish_batch([(T.status(node), json.dumps(bad).encode())])
            assert eventually(lambda: states(client)[0] == (third, "failed"), timeout=15)
            assert deploys(client)[0]["failed"] == {"node": node, "reason": "cannot pull egress"}

            # an invalid commit is no deployment: it is only in the sync topic
            remote.commit("broken", files={EGRESS: "name: egress\nreplicas: two\n"})
            assert not service.syncer.sync_ref("main").ok
            service.deployer.check()
            assert [c for c, _ in states(client)] == [third, second, first]
    finally:
        service.stop()


def test_history_survives_a_restart_and_a_pending_record_is_resolved(
    tmp_path: Path, mosquitto: Mosquitto
) -> None:
    remote = ConfigRemote(tmp_path)
    first = remote.commit("sample", copy_from=SAMPLE)
    one = start(remote, tmp_path, mosquitto.url, deploy_timeout_s=60)
    try:
        generations = one.syncer.last["main"].generations
        with reader(mosquitto.url, "fake-agents") as agents:
            agents.publish_batch(converged_on(first, generations))
            with reader(mosquitto.url) as client:
                assert eventually(lambda: states(client) == [(first, "converged")])
        second = remote.commit("egress: grace", files=egress_with(5))
        pending = one.syncer.sync_ref("main")
    finally:
        one.stop()
    # while config-sync is away the agents apply the second commit
    with reader(mosquitto.url, "fake-agents") as agents:
        agents.publish_batch(converged_on(second, pending.generations))
    two = start(remote, tmp_path, mosquitto.url, deploy_timeout_s=60)
    try:
        with reader(mosquitto.url) as client:
            assert eventually(lambda: states(client) == [(second, "converged"), (first, "converged")])
            kept = deploys(client)
            assert kept[0]["nodes"] == pending.generations
            # a third run, stopped with a record pending, then a commit pushed while it was down
            third = remote.commit("egress: grace 6s", files=egress_with(6))
            two.syncer.sync_ref("main")
            assert eventually(lambda: states(client)[0] == (third, "pending"))
    finally:
        two.stop()
    fourth = remote.commit("egress: grace 7s", files=egress_with(7))
    three = start(remote, tmp_path, mosquitto.url, deploy_timeout_s=60)
    try:
        with reader(mosquitto.url) as client:
            expected = [
                (fourth, "pending"),
                (third, "superseded"),
                (second, "converged"),
                (first, "converged"),
            ]
            assert eventually(lambda: states(client) == expected)
    finally:
        three.stop()


@pytest.mark.slow
def test_at_most_twenty_records_are_retained(tmp_path: Path, mosquitto: Mosquitto) -> None:
    remote = ConfigRemote(tmp_path)
    remote.commit("sample", copy_from=SAMPLE)
    service = start(remote, tmp_path, mosquitto.url, deploy_timeout_s=60)
    try:
        commits = []
        for i in range(21):
            commits.append(remote.commit(f"egress {i}", files=egress_with(i + 1)))
            service.syncer.sync_ref("main")
        with reader(mosquitto.url) as client:
            assert eventually(
                lambda: len(deploys(client)) == 20 and deploys(client)[0]["commit"] == commits[-1]
            )
            assert [d["commit"] for d in deploys(client)] == commits[::-1][:20]
    finally:
        service.stop()


@pytest.mark.slow
def test_phrame_status_shows_the_last_deployments(tmp_path: Path, mosquitto: Mosquitto) -> None:
    remote = ConfigRemote(tmp_path)
    first = remote.commit("sample", copy_from=SAMPLE)
    service = start(remote, tmp_path, mosquitto.url, deploy_timeout_s=60)
    try:
        generations = service.syncer.last["main"].generations
        second = remote.commit("egress: grace 40s", files=egress_with(40))
        service.syncer.sync_ref("main")
        with reader(mosquitto.url) as client, reader(mosquitto.url, "fake-agents") as agents:
            agents.publish_batch(converged_on(second, {n: g + 1 for n, g in generations.items()}))
            assert eventually(lambda: states(client) == [(second, "converged"), (first, "superseded")])
        as_json = run_status(mosquitto.url)
        (env,) = json.loads(as_json.stdout)["environments"]
        assert [(d["commit"], d["state"]) for d in env["deploys"]] == [
            (second, "converged"),
            (first, "superseded"),
        ]
        text = run_status(mosquitto.url, json_out=False).stdout
        assert re.search(
            rf"^    deploy {second[:10]} converged in [0-9.]+ s: egress: grace 40s \(Test Ops", text, re.M
        )
        assert f"    deploy {first[:10]} superseded: sample (Test Ops <ops@example.test>)" in text
    finally:
        service.stop()
