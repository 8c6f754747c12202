"""Deployment notifications from a running config-sync (real broker and git, a real HTTP
receiver on 127.0.0.1): a deployment that times out sends ``failed`` once, the next one that
converges sends ``recovered`` once, and a receiver answering 500 delays neither."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from config_sync.reporting import LocalReporter
from config_sync.service import ConfigSync
from schemas import Topics, check_payload
from tests.support.mosquitto import Mosquitto
from tests.support.sync_support import SAMPLE, ConfigRemote, reader, settings_for
from tests.support.waiting import wait_for
from tests.support.webhook_receiver import webhook_receiver

T = Topics()
ENV_FILE = "environments/studio-a/environment.yaml"
NOTIFY = """
notify:
  - name: pager
    format: json
    url_file: pager.url
  - name: ops-chat
    format: slack
    url_file: ops-chat.url
    on: [failed]
"""


def pager_only(tmp_path: Path, url: str, pager: Any, **kw: Any) -> tuple[ConfigRemote, str, Any]:
    """A config repository whose environment notifies ``pager`` only, and config-sync's
    settings for it (``kw`` on top): (the remote, the commit that added the block, settings)."""
    secrets = tmp_path / "notify-secrets"
    secrets.mkdir()
    (secrets / "pager.url").write_text(pager.url)
    remote = ConfigRemote(tmp_path)
    remote.commit("sample", copy_from=SAMPLE)
    env_yaml = (remote.work_path / ENV_FILE).read_text() + NOTIFY.split("  - name: ops-chat")[0]
    first = remote.commit("notify the pager", files={ENV_FILE: env_yaml})
    kw = {"poll_s": 3600, "debounce_s": 0, "notify_secrets_dir": str(secrets), **kw}
    return remote, first, settings_for(remote, tmp_path / "state", url, **kw)


def deploy_states(service: ConfigSync, sha: str) -> list[str]:
    statuses = service.reporter.snapshot()["statuses"]
    return [s["state"] for s in statuses if s["name"] == "phrame/deploy" and s["sha"] == sha]


@pytest.mark.slow
def test_a_failed_deployment_and_its_recovery_are_each_sent_once(
    tmp_path: Path, mosquitto: Mosquitto
) -> None:
    secrets = tmp_path / "notify-secrets"
    secrets.mkdir()
    with webhook_receiver(answers=[500]) as pager, webhook_receiver() as chat:
        pager.listen()
        chat.listen()
        (secrets / "pager.url").write_text(pager.url + "\n")
        (secrets / "ops-chat.url").write_text(chat.url + "\n")
        remote = ConfigRemote(tmp_path)
        remote.commit("sample", copy_from=SAMPLE)
        env_yaml = (remote.work_path / ENV_FILE).read_text() + NOTIFY
        first = remote.commit("notify the pager", files={ENV_FILE: env_yaml})
        settings = settings_for(
            remote,
            tmp_path / "state",
            mosquitto.url,
            poll_s=3600,
            debounce_s=0,
            deploy_timeout_s=1.5,
            notify_secrets_dir=str(secrets),
            notify_retry_min_s=0.05,
            notify_retry_max_s=0.2,
        )
        service = ConfigSync(settings, reporter=LocalReporter())
        service.start()
        try:
            assert service.queue.wait_idle(30)
            # no agent answers: the deployment fails at its deadline
            wait_for(lambda: deploy_states(service, first)[-1:] == ["failed"], "phrame/deploy failed")
            wait_for(lambda: pager.events() == ["failed"], "the pager's failed", observe=lambda: pager.tries)
            assert pager.tries[:2] == [500, 200]  # retried after the 500
            doc = pager.received[0]
            check_payload("notify-event", doc)
            assert (doc["environment"], doc["commit"], doc["state"]) == ("studio-a", first, "failed")
            # the health's reasons: the nodes that should have applied it and said nothing
            assert doc["reasons"] and "not reporting" in doc["reasons"][0], doc["reasons"]
            wait_for(lambda: len(chat.received) == 1, "the chat's failed")
            assert chat.received[0]["text"].startswith(":red_circle: *studio-a*: deployment failed")
            # the next commit converges on every node it changed
            second = remote.commit("drop egress", files={"environments/studio-a/services/egress.yaml": None})
            started = time.monotonic()
            outcome = service.syncer.sync_ref("main")
            assert outcome.generations
            with reader(mosquitto.url, "fake-agents") as agents:
                converged = {"state": "online", "commit": second, "converged": True}
                agents.publish_batch(
                    [
                        (T.status(n), json.dumps({**converged, "generation": g}).encode())
                        for n, g in outcome.generations.items()
                    ]
                )
                wait_for(lambda: deploy_states(service, second)[-1:] == ["success"], "phrame/deploy success")
                assert time.monotonic() - started < 1.5, "the deployment waited for notifications"
                wait_for(lambda: pager.events() == ["failed", "recovered"], "the pager's recovered")
                assert pager.received[1]["commit"] == second and pager.received[1]["state"] == "healthy"
                # more passes and ticks over the same state send nothing more
                service.syncer.sync_ref("main")
                service.deployer.check()
                wait_for(lambda: service.notifier.outbox.pending() == 0, "an empty outbox")
            assert pager.events() == ["failed", "recovered"]
            assert len(chat.received) == 1  # ops-chat takes failed only
            metrics = service.metrics.render().decode()
            assert (
                'phrame_config_sync_notifications_total{environment="studio-a",result="retried",target="pager"} 1.0'
                in metrics
            )
        finally:
            service.stop()


def converge(url: str, commit: str, generations: dict[str, int]) -> None:
    """Fake agents: every node reports ``commit`` converged at its generation (retained)."""
    converged = {"state": "online", "commit": commit, "converged": True}
    with reader(url, "fake-agents") as agents:
        agents.publish_batch(
            [
                (T.status(n), json.dumps({**converged, "generation": g}).encode())
                for n, g in generations.items()
            ]
        )


@pytest.mark.slow
def test_after_a_restart_a_failure_is_not_sent_again_and_its_recovery_is(
    tmp_path: Path, mosquitto: Mosquitto
) -> None:
    with webhook_receiver() as pager:
        pager.listen()
        remote, first, settings = pager_only(tmp_path, mosquitto.url, pager, deploy_timeout_s=1.5)
        one = ConfigSync(settings, reporter=LocalReporter())
        one.start()
        try:
            assert one.queue.wait_idle(30)
            wait_for(lambda: pager.events() == ["failed"], "the pager's failed", observe=lambda: pager.tries)
        finally:
            one.stop()
        two = ConfigSync(settings, reporter=LocalReporter())
        two.start()
        try:
            assert two.queue.wait_idle(30)
            second = remote.commit("drop egress", files={"environments/studio-a/services/egress.yaml": None})
            outcome = two.syncer.sync_ref("main")
            converge(mosquitto.url, second, outcome.generations)
            wait_for(lambda: pager.events() == ["failed", "recovered"], "the recovery", observe=pager.events)
            assert pager.received[1]["commit"] == second and first != second
            two.deployer.check()
            wait_for(lambda: two.notifier.outbox.pending() == 0, "an empty outbox")
        finally:
            two.stop()
    assert pager.events() == ["failed", "recovered"]


def deploy_record(url: str, env: str = "studio-a") -> dict[str, Any]:
    """The newest ``deploys`` record of ``env`` as the broker holds it."""
    with reader(url, "records") as client:
        raw = client.collect_retained(T.env_deploys(env), settle=0.1).get(T.env_deploys(env))
    assert raw, f"no deploys record of {env}"
    doc = json.loads(raw)
    check_payload("desired-deploys", doc)
    return dict(doc["deploys"][0])


def report(url: str, node: str, replica: str, **doc: object) -> None:
    """A fake agent's retained report of one container."""
    check_payload("actual-item", doc)
    with reader(url, "fake-agent-items") as agent:
        agent.publish_batch([(T.actual_item(node, "containers", replica), json.dumps(doc).encode())])


@pytest.mark.slow
def test_a_converged_deployment_that_later_degrades_sends_degraded_once_and_its_recovery_once(
    tmp_path: Path, mosquitto: Mosquitto
) -> None:
    """Argo CD's on-health-degraded: the environment's health is followed after its deployment
    succeeded; a crash loop sends ``degraded`` once (not on every tick, not again after a
    restart of config-sync), the replica running well again sends ``recovered`` once."""
    with webhook_receiver() as pager:
        pager.listen()
        _, first, settings = pager_only(
            tmp_path, mosquitto.url, pager, deploy_timeout_s=120, deploy_settle_s=0.3
        )
        one = ConfigSync(settings, reporter=LocalReporter())
        one.start()
        try:
            assert one.queue.wait_idle(30)
            pending = deploy_record(mosquitto.url)
            assert pending["commit"] == first
            converge(mosquitto.url, first, pending["nodes"])
            wait_for(lambda: deploy_states(one, first)[-1:] == ["success"], "phrame/deploy success")
            replica, node = next((r, n) for r, n in sorted(pending["replicas"].items()) if n)
            # the deployment is over; later a replica starts crash-looping
            crashing = {"state": "running", "health": None, "digest": "sha256:" + "1" * 64}
            report(mosquitto.url, node, replica, **crashing, started_at="t1", restart_count=5)
            wait_for(lambda: pager.events() == ["degraded"], "the degradation", observe=pager.events)
            doc = pager.received[0]
            check_payload("notify-event", doc)
            assert (doc["commit"], doc["state"], doc["previous_state"]) == (first, "degraded", "healthy")
            assert doc["reasons"] == [f"{node}: {replica}: crash-looping: restarted 5 times"]
            # more ticks over the same state send nothing more; the record says it
            for _ in range(3):
                one.deployer.check()
            wait_for(lambda: deploy_record(mosquitto.url)["health"] == "degraded", "the record's health")
            assert deploy_record(mosquitto.url)["state"] == "converged"
            wait_for(lambda: one.notifier.outbox.pending() == 0, "an empty outbox")
        finally:
            one.stop()
        two = ConfigSync(settings, reporter=LocalReporter())
        two.start()
        try:
            assert two.queue.wait_idle(30)
            # the restarted config-sync judges the same crash loop: nothing sent again
            record = two.history.by_env["studio-a"][0]
            degraded = lambda: two.deployer.record_health("studio-a", record, []).state == "degraded"  # noqa: E731
            wait_for(degraded, "the crash loop judged again")
            for _ in range(3):
                two.deployer.check()
            wait_for(lambda: two.notifier.outbox.pending() == 0, "an empty outbox")
            assert pager.events() == ["degraded"]
            # it runs well again: one recovery
            report(mosquitto.url, node, replica, **crashing, started_at="t2", restart_count=0)
            wait_for(
                lambda: pager.events() == ["degraded", "recovered"], "the recovery", observe=pager.events
            )
            assert (pager.received[1]["commit"], pager.received[1]["previous_state"]) == (first, "degraded")
            for _ in range(3):
                two.deployer.check()
            wait_for(lambda: two.notifier.outbox.pending() == 0, "an empty outbox")
        finally:
            two.stop()
    assert pager.events() == ["degraded", "recovered"]
