"""config-sync against a real mosquitto and a real bare git remote (pushes with gitpython).

Each test drives :class:`Syncer` passes directly (no HTTP) and reads the broker back with
``collect_retained``, comparing with what ``phrame render --format topics`` prints.
"""

from __future__ import annotations

import contextlib
import io
import json
import logging
import shutil
import signal
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from config_sync.errors import PublishError
from config_sync.publication.plane import decode
from config_sync.reporting import LocalReporter
from config_sync.service import ConfigSync
from phrame.cli import main as phrame_main
from phrame.config_repo.render import carry_forward
from phrame.gitlab import GitLabError
from schemas import Topics, canonical_json, check_payload
from tests.support.mosquitto import Mosquitto
from tests.support.sync_support import (
    SAMPLE,
    ConfigRemote,
    desired_on_broker,
    reader,
    settings_for,
)
from tests.support.waiting import wait_for

T = Topics()
SYNC = T.env_sync("studio-a")
DEPLOYS = T.env_deploys("studio-a")  # the deployment history: config-sync's runtime state, as SYNC
TAMS = SAMPLE / "environments" / "studio-a" / "services" / "tams.yaml"
TAMS_V2 = TAMS.read_text().replace("tams:1.0.3", "tams:1.0.4")


def cli_render(path: Path, sha: str) -> dict[str, Any]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert phrame_main(["render", str(path), "--ref", sha, "--format", "topics"]) == 0
    doc: dict[str, Any] = json.loads(out.getvalue())
    return doc


def without_sync(published: dict[str, bytes]) -> dict[str, Any]:
    """What ``phrame render`` also holds: the desired plane without the runtime topics."""
    return {t: json.loads(p) for t, p in published.items() if t not in (SYNC, DEPLOYS)}


@pytest.fixture
def remote(tmp_path: Path) -> ConfigRemote:
    return ConfigRemote.with_sample(tmp_path)


@pytest.fixture
def service(remote: ConfigRemote, tmp_path: Path, mosquitto: Mosquitto) -> Iterator[ConfigSync]:
    svc = ConfigSync(
        settings_for(remote, tmp_path / "state", mosquitto.url, poll_s=3600, debounce_s=0),
        reporter=LocalReporter(),
    )
    svc.start()
    assert svc.queue.wait_idle(30)
    yield svc
    svc.stop()


def test_valid_push_publishes_exactly_the_rendering_and_a_second_sync_nothing(
    remote: ConfigRemote, service: ConfigSync, mosquitto: Mosquitto
) -> None:
    sha = remote.work.head.commit.hexsha
    with reader(mosquitto.url) as client:
        on_broker = desired_on_broker(client)
    assert without_sync(on_broker) == cli_render(remote.bare_path, sha)
    sync = json.loads(on_broker[SYNC])
    check_payload("desired-sync", sync)
    assert sync["ok"] is True and sync["last_applied"]["commit"] == sha and sync["ref"] == "main"
    # every payload is canonical JSON, byte for byte
    assert all(canonical_json(json.loads(p)) == p for p in on_broker.values())

    again = service.syncer.sync_ref("main")
    assert again.messages == []
    assert service.reporter.snapshot()["statuses"][-1]["state"] == "success"


def test_removing_a_service_clears_its_topics_and_updates_manifests(
    remote: ConfigRemote, service: ConfigSync, mosquitto: Mosquitto
) -> None:
    with reader(mosquitto.url) as client:
        before = desired_on_broker(client)
    sha = remote.commit("drop egress", files={"environments/studio-a/services/egress.yaml": None})
    outcome = service.syncer.sync_ref("main")
    assert outcome.ok, outcome.errors
    gone = [t for t in before if T.parse(t).service == "egress"]
    assert gone and T.env_service("studio-a", "egress") in gone
    cleared = [t for t, p in outcome.messages if p is None]
    assert sorted(cleared) == sorted(gone)
    with reader(mosquitto.url) as client:
        after = desired_on_broker(client)
    assert not any(t in after for t in gone)
    assert without_sync(after) == carried(before, cli_render(remote.bare_path, sha))
    nodes = {T.parse(t).node for t in gone if T.parse(t).node}
    for node in nodes:
        manifest = json.loads(after[T.manifest(str(node))])
        assert manifest["generation"] == 2 and manifest["commit"] == sha
        assert not any("egress" in key for key in manifest["items"])
    # nodes without egress keep their manifest byte for byte
    for topic, payload in before.items():
        if topic.endswith("/manifest") and T.parse(topic).node not in nodes:
            assert after[topic] == payload
    assert outcome.messages[-1][0] == SYNC
    assert sorted(service.deployer.active["main"].nodes) == sorted(str(n) for n in nodes)


def test_the_decoded_plane_kept_between_publications_is_the_broker_s(
    remote: ConfigRemote, service: ConfigSync, mosquitto: Mosquitto
) -> None:
    """The publisher decodes only what it sent since its last publication; over changes,
    a removal and a return, its view is what decoding the whole plane again gives, and
    the plane is what the broker holds."""
    publisher = service.syncer.publisher
    egress = (SAMPLE / "environments/studio-a/services/egress.yaml").read_text()
    steps = [
        {"environments/studio-a/services/tams.yaml": TAMS_V2},
        {"environments/studio-a/services/egress.yaml": None},
        {"environments/studio-a/services/egress.yaml": egress},
        {"environments/studio-a/services/tams.yaml": TAMS_V2.replace("1.0.4", "1.0.5")},
    ]
    kept = None
    for i, files in enumerate(steps):
        remote.commit(f"step {i}", files=files)
        assert service.syncer.sync_ref("main").ok
        published = publisher.published
        assert published is not None
        view = publisher._decoded_view(published)
        assert view == decode(published, T), i  # no decoding cache: every payload read again
        assert kept is None or view is kept, i  # the same view, brought up to date
        kept = view
        with reader(mosquitto.url) as client:  # the deploy records are the history's own
            assert {t: p for t, p in desired_on_broker(client).items() if t != DEPLOYS} == published, i


def carried(before: dict[str, bytes], rendered: dict[str, Any]) -> dict[str, Any]:
    """``rendered`` carried forward over ``before`` (unchanged items keep their payloads)."""
    return carry_forward(rendered, {t: json.loads(p) for t, p in before.items() if t != SYNC}, T)


def test_invalid_commit_publishes_nothing_but_every_error(
    remote: ConfigRemote, service: ConfigSync, mosquitto: Mosquitto
) -> None:
    good = remote.work.head.commit.hexsha
    with reader(mosquitto.url) as client:
        before = desired_on_broker(client)
    bad = remote.commit(
        "break two things",
        files={
            "environments/studio-a/services/egress.yaml": "name: egress\nimage: x\nnetworks: [nowhere]\n",
            "nodes/core-01.yaml": "name: core-01\nbogus: 1\n",
        },
    )
    outcome = service.syncer.sync_ref("main")
    assert not outcome.ok
    assert [t for t, _ in outcome.messages] == [SYNC]
    expected = validate_cli(remote.bare_path, bad)
    assert len(outcome.errors) == len(expected) >= 2
    assert {e["rule"] for e in outcome.errors} == {p["rule"] for p in expected}
    with reader(mosquitto.url) as client:
        after = desired_on_broker(client)
    assert without_sync(after) == without_sync(before)
    sync = json.loads(after[SYNC])
    check_payload("desired-sync", sync)
    assert sync["ok"] is False and sync["last_attempted"]["commit"] == bad
    assert sync["last_applied"]["commit"] == good
    assert len(sync["errors"]) == len(expected)
    status = service.reporter.snapshot()["statuses"][-1]
    assert (status["sha"], status["name"], status["state"]) == (bad, "phrame/validate", "failed")
    assert status["description"].startswith(f"{len(expected)} problem(s)")


def validate_cli(path: Path, sha: str) -> list[dict[str, Any]]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert phrame_main(["validate", str(path), "--ref", sha, "--format", "json"]) == 1
    problems: list[dict[str, Any]] = json.loads(out.getvalue())["problems"]
    return problems


def test_restarted_config_sync_republishes_nothing(
    remote: ConfigRemote, service: ConfigSync, mosquitto: Mosquitto, tmp_path: Path
) -> None:
    published = service.publisher.messages_total
    assert published > 0
    service.stop()
    again = ConfigSync(
        settings_for(remote, tmp_path / "state2", mosquitto.url, poll_s=3600, debounce_s=0),
        reporter=LocalReporter(),
    )
    again.start()
    try:
        assert again.queue.wait_idle(30)
        assert again.sync_counts == {"main": 1}
        assert again.publisher.messages_total == 0
        assert again.syncer.last["main"].messages == []
    finally:
        again.stop()


def test_a_broker_that_lost_its_retained_topics_gets_them_back(
    remote: ConfigRemote, service: ConfigSync, mosquitto: Mosquitto
) -> None:
    with reader(mosquitto.url) as client:
        before = desired_on_broker(client)
    mosquitto.restart()  # persistence off: every retained topic is gone
    after: dict[str, bytes] = {}

    def republished() -> bool:
        nonlocal after
        if service.mqtt.is_connected and service.queue.wait_idle(10):
            with reader(mosquitto.url, "test-reader-2") as client:
                after = desired_on_broker(client)
        return unnumbered(after) == unnumbered(before)

    wait_for(
        republished, "the retained topics published again", 20, interval=0.3, observe=lambda: sorted(after)
    )
    assert json.loads(after[SYNC])["last_applied"]["commit"] == remote.work.head.commit.hexsha
    # the manifests come back above the generations published before: they only ever grow
    manifests = [t for t in before if t.endswith("/manifest")]
    assert manifests and all(generation(after[t]) > generation(before[t]) for t in manifests)


def unnumbered(published: dict[str, bytes]) -> dict[str, Any]:
    docs = without_sync(published)
    return {t: {k: v for k, v in d.items() if k != "generation"} for t, d in docs.items()}


def generation(raw: bytes) -> int:
    return int(json.loads(raw)["generation"])


def test_a_poll_with_the_same_head_reads_nothing_again(remote: ConfigRemote, service: ConfigSync) -> None:
    sha = remote.work.head.commit.hexsha
    reading = service.syncer.read(sha)
    assert service.syncer.read(sha) is reading
    assert service.syncer.sync_ref("main").messages == []


def test_a_publish_refused_half_way_sends_no_manifest_and_the_next_pass_completes_it(
    remote: ConfigRemote, tmp_path: Path
) -> None:
    sha = remote.work.head.commit.hexsha
    expected = cli_render(remote.bare_path, sha)
    denied = next(t for t in expected if "/containers/" in t)
    # mosquitto started as root drops to its own user before reading the ACL: a directory it may enter
    acl_dir = Path(tempfile.mkdtemp(prefix="phrame-sync-acl-"))
    acl_dir.chmod(0o755)
    acl = acl_dir / "acl"
    acl.write_text(f"topic readwrite #\ntopic deny {denied}\n")
    acl.chmod(0o644)
    broker = Mosquitto([f"acl_file {acl}"]).start()
    svc = ConfigSync(
        # retry_min_s: no retry of the refused pass runs while this test completes it by hand
        settings_for(remote, tmp_path / "state", broker.url, poll_s=3600, debounce_s=0, retry_min_s=3600),
        reporter=LocalReporter(),
    )
    try:
        svc.start()
        assert svc.queue.wait_idle(30)
        worker = svc.queue.workers["ref:main"]
        assert worker.failures == 1 and "PublishError" in str(worker.last_error)
        with reader(broker.url) as client:
            half = desired_on_broker(client)
        assert half and denied not in half
        assert not any(t.endswith("/manifest") for t in half) and SYNC not in half
        acl.write_text("topic readwrite #\n")
        assert broker.proc is not None
        broker.proc.send_signal(signal.SIGHUP)  # mosquitto re-reads its ACL

        def sync_once_allowed() -> Any:
            try:  # until the reload, the denied topic is refused again (and nothing after it sent)
                return svc.syncer.sync_ref("main")
            except PublishError:
                return None

        outcome = wait_for(sync_once_allowed, "a sync after the ACL reload", 10, interval=0.1)
        sent = [t for t, _ in outcome.messages]
        assert sent[0] == denied and all(t.endswith("/manifest") for t in sent[1:-1]) and sent[-1] == SYNC
        with reader(broker.url) as client:
            assert without_sync(desired_on_broker(client)) == expected
    finally:
        svc.stop()
        broker.stop()
        shutil.rmtree(acl_dir, ignore_errors=True)


def test_an_idle_poll_logs_nothing_at_info_and_a_change_does(
    remote: ConfigRemote, service: ConfigSync, caplog: pytest.LogCaptureFixture
) -> None:
    """A poll that publishes nothing must not print a line every minute."""
    with caplog.at_level(logging.DEBUG):
        assert service.syncer.sync_ref("main").messages == []
    said = [r for r in caplog.records if r.name.startswith("config_sync") and r.levelno >= logging.INFO]
    assert said == [], [r.getMessage() for r in said]
    assert any(r.getMessage().startswith("published main at ") for r in caplog.records)  # at DEBUG
    caplog.clear()
    remote.commit("bump", files={"environments/studio-a/services/tams.yaml": TAMS_V2})
    with caplog.at_level(logging.DEBUG):
        assert service.syncer.sync_ref("main").messages
    info = [r.getMessage() for r in caplog.records if r.levelno == logging.INFO]
    assert any(m.startswith("published main at ") for m in info), info


@pytest.mark.parametrize(
    ("files", "rule"),
    [
        ({"nodes/core-01.yaml": "name: core-01\nlabels:\n  rack: " + "9" * 5000 + "\n"}, "yaml-syntax"),
        ({"environments/studio-a/services/egress.yaml": "EGRESS"}, "yaml-encoding"),
        ({"environments/studio-a/node.json": "HUGE"}, "json-syntax"),
    ],
    ids=["huge-integer", "lone-surrogate", "huge-integer-in-node-json"],
)
def test_hostile_commit_publishes_only_its_errors_and_the_next_one_deploys(
    remote: ConfigRemote, service: ConfigSync, mosquitto: Mosquitto, files: dict[str, str], rule: str
) -> None:
    """Such a commit used to raise out of the pass at every poll
    (no status, nothing published, the ref stuck on the old commit)."""
    egress = remote.work_path / "environments/studio-a/services/egress.yaml"
    node_json = remote.work_path / "environments/studio-a/node.json"
    hostile = {
        "EGRESS": egress.read_text().replace("description: Programme", 'description: "\\ud800" #'),
        "HUGE": node_json.read_text().replace('"core-01"', "1" + "0" * 5000, 1),
    }
    files = {name: hostile.get(text, text) for name, text in files.items()}
    with reader(mosquitto.url) as client:
        before = desired_on_broker(client)
    bad = remote.commit("hostile", files=files)
    outcome = service.syncer.sync_ref("main")
    assert not outcome.ok
    assert [t for t, _ in outcome.messages] == [SYNC]
    assert [(e["file"], e["rule"]) for e in outcome.errors] == [(next(iter(files)), rule)]
    assert outcome.errors == validate_cli(remote.bare_path, bad)
    status = service.reporter.snapshot()["statuses"][-1]
    assert (status["sha"], status["state"]) == (bad, "failed")
    with reader(mosquitto.url) as client:
        assert without_sync(desired_on_broker(client)) == without_sync(before)
    fixed = remote.commit("fix", copy_from=SAMPLE)
    assert service.syncer.sync_ref("main").ok
    assert service.reporter.snapshot()["statuses"][-1]["sha"] == fixed


class DownReporter(LocalReporter):
    """GitLab unreachable, as the GitLab adapter reports it."""

    def set_status(
        self, sha: str, name: str, state: str, description: str, *, ref: str | None = None
    ) -> None:
        raise GitLabError(f"status {name}={state} on {sha[:12]}: GitLab unreachable: ConnectionError")


class BuggyReporter(LocalReporter):
    """A programming error in the reporting path (LocalReporter's ValueError for a bad state)."""

    def set_status(
        self, sha: str, name: str, state: str, description: str, *, ref: str | None = None
    ) -> None:
        super().set_status(sha, name, state.upper(), description, ref=ref)


def test_gitlab_down_holds_no_deployment_back_but_a_reporting_bug_is_raised(
    remote: ConfigRemote, service: ConfigSync, caplog: pytest.LogCaptureFixture
) -> None:
    service.syncer.reporter = DownReporter()
    remote.commit("tams 1.0.4", files={"environments/studio-a/services/tams.yaml": TAMS_V2})
    with caplog.at_level(logging.WARNING, logger="config_sync"):
        outcome = service.syncer.sync_ref("main")
    assert outcome.ok and outcome.messages, outcome.errors
    assert any("GitLab unreachable" in r.getMessage() for r in caplog.records)
    service.syncer.reporter = BuggyReporter()
    remote.commit("tams 1.0.3 again", files={"environments/studio-a/services/tams.yaml": TAMS.read_text()})
    with pytest.raises(ValueError, match="unknown commit status state 'SUCCESS'"):
        service.syncer.sync_ref("main")  # the work queue logs it with its traceback and retries


@pytest.mark.slow
def test_anti_entropy_puts_back_what_the_broker_lost_or_changed_after_its_puback(
    remote: ConfigRemote, tmp_path: Path, mosquitto: Mosquitto
) -> None:
    """A PUBACK is no proof: a topic overwritten with an older payload or cleared behind
    config-sync's back (what a clustered broker losing its stream leader leaves) is sent
    again by the next read-back, here the timer's (PHRAME_ANTI_ENTROPY_S=1); topics that
    others write (a deploy record) are left alone."""
    svc = ConfigSync(
        settings_for(remote, tmp_path / "state", mosquitto.url, poll_s=3600, debounce_s=0, anti_entropy_s=1),
        reporter=LocalReporter(),
    )
    svc.start()
    try:
        assert svc.queue.wait_idle(30)
        with reader(mosquitto.url) as client:
            before = desired_on_broker(client)
            item = next(t for t in sorted(before) if "/containers/" in t)
            manifest = next(t for t in sorted(before) if t.endswith("/manifest"))
            foreign = f"{svc.topics.prefix}/desired/environments/studio-a/placement"
            client.publish_batch([(item, b'{"stale": true}'), (manifest, None), (foreign, b'{"mine": 1}')])
            after: dict[str, bytes] = {}

            def repaired() -> bool:
                nonlocal after
                after = desired_on_broker(client)
                return after.get(item) == before[item] and after.get(manifest) == before[manifest]

            wait_for(repaired, "the lost and the changed topic sent again", 20, interval=0.3)
            assert after.get(foreign) == b'{"mine": 1}'  # not config-sync's to hold
        assert svc.publisher.repaired_total >= 2
        assert "phrame_config_sync_anti_entropy_repaired_total" in svc.metrics.render().decode()
    finally:
        svc.stop()
