"""ActualReporter: actual payloads are valid, only changes are published, vanished items cleared."""

from __future__ import annotations

import json
from typing import Any

import pytest

from node_agent.errors import NotFound
from node_agent.models import DIGEST, MANAGED, NODE, ActualState, ObservedContainer
from node_agent.reporting import ActualReporter
from schemas import Topics, check_payload
from tests.support import agent_support as spec

T = Topics()


class RecordingPublisher:
    def __init__(self) -> None:
        self.sent: list[tuple[str, Any]] = []

    def publish(self, topic: str, payload: bytes | None, retain: bool = True, qos: int = 1) -> None:
        assert retain and qos == 1
        self.sent.append((topic, json.loads(payload) if payload else None))


def container(name: str, state: str = "running", node: str = "a") -> ObservedContainer:
    labels = {MANAGED: "true", NODE: node, DIGEST: "sha256:" + "1" * 64, **spec.item_labels(name)}
    return ObservedContainer(id="id-" + name, name=name, state=state, labels=labels, image="i:1")


def test_items_published_once_then_only_changes_and_clears():
    pub, inspected = RecordingPublisher(), []

    def inspect(cid: str) -> dict[str, Any]:
        inspected.append(cid)
        return {"State": {"StartedAt": "2026-01-01T00:00:00Z", "ExitCode": 0}, "RestartCount": 0}

    r = ActualReporter(pub, T, "a", inspect=inspect)
    desired = spec.desired([spec.container("e", "web"), spec.container("e", "db")])
    web = container("e.web.0")
    other = container("e.x.0", node="b")  # another node's container is never reported
    assert r.report_items(desired, ActualState(containers={web.name: web, other.name: other}), {}) == 2
    topics = dict(pub.sent)
    assert topics[T.actual_item("a", "containers", "e.web.0")]["state"] == "running"
    assert topics[T.actual_item("a", "containers", "e.db.0")]["state"] == "missing"
    for payload in topics.values():
        check_payload("actual-item", payload)
    pub.sent.clear()
    assert r.report_items(desired, ActualState(containers={web.name: web}), {}) == 0
    assert pub.sent == [] and inspected == ["id-e.web.0"]  # no re-inspect when unchanged
    failed = {"e.db.0": "image missing"}
    assert r.report_items(desired, ActualState(containers={web.name: web}), failed) == 1
    assert pub.sent[0][1]["error"] == "image missing"
    pub.sent.clear()
    r.report_items(spec.desired([]), ActualState(), {})
    assert sorted(t for t, p in pub.sent if p is None) == [
        T.actual_item("a", "containers", "e.db.0"),
        T.actual_item("a", "containers", "e.web.0"),
    ]


def test_status_only_on_change_and_heartbeat_always():
    pub = RecordingPublisher()
    r = ActualReporter(pub, T, "a", inspect=lambda _c: {})
    assert r.report_status("online", applied=(3, "abc"), converged=True)
    assert not r.report_status("online", applied=(3, "abc"), converged=True)
    r.forget()
    assert r.report_status("online", applied=(3, "abc"), converged=True)
    status = pub.sent[-1][1]
    assert status["generation"] == 3 and status["commit"] == "abc" and status["converged"]
    r.heartbeat(5.0, {"containers": 2})
    r.heartbeat(5.0, {"containers": 2})
    beats = [p for t, p in pub.sent if t == T.heartbeat("a")]
    assert [b["seq"] for b in beats] == [0, 1]
    check_payload("actual-heartbeat", beats[0])


def test_the_heartbeat_is_dated_by_the_wall_clock_handed_in():
    pub = RecordingPublisher()
    r = ActualReporter(pub, T, "a", inspect=lambda _c: {}, wall_clock=lambda: 1_000_000.5)
    r.heartbeat(5.0, {})
    assert pub.sent[-1][1]["ts"] == 1_000_000.5


def test_a_container_gone_before_its_inspect_is_reported_without_details():
    pub = RecordingPublisher()

    def inspect(cid: str) -> dict[str, Any]:
        raise NotFound(f"inspect {cid}: not found (No such container)")

    r = ActualReporter(pub, T, "a", inspect=inspect)
    web = container("e.web.0", state="exited")
    r.report_items(spec.desired([spec.container("e", "web")]), ActualState(containers={web.name: web}), {})
    assert dict(pub.sent)[T.actual_item("a", "containers", "e.web.0")]["started_at"] is None


def test_a_bug_while_reading_details_is_not_hidden_as_a_vanished_container():
    def inspect(cid: str) -> dict[str, Any]:
        return {"State": None}["Stat"]  # a KeyError: our bug, not Docker's answer

    r = ActualReporter(RecordingPublisher(), T, "a", inspect=inspect)
    web = container("e.web.0")
    with pytest.raises(KeyError):
        r.report_items(
            spec.desired([spec.container("e", "web")]), ActualState(containers={web.name: web}), {}
        )


KILLED = "2026-12-01T17:00:00.123456789Z"
ZERO = "0001-01-01T00:00:00Z"


def details_with(finished: str) -> dict[str, Any]:
    return {"State": {"StartedAt": "2026-12-01T17:00:00.5Z", "FinishedAt": finished, "ExitCode": 0}}


def test_a_container_the_agent_started_after_it_exited_reports_that_exit():
    pub = RecordingPublisher()
    finished = {"at": ZERO}
    r = ActualReporter(pub, T, "a", inspect=lambda _c: details_with(finished["at"]))
    desired = spec.desired([spec.container("e", "web")])
    topic = T.actual_item("a", "containers", "e.web.0")
    web = container("e.web.0")
    r.report_items(desired, ActualState(containers={web.name: web}), {})
    first = dict(pub.sent)[topic]
    assert (first["finished_at"], first["last_exit"], first["agent_restarts"]) == (None, None, 0)

    dead = ObservedContainer(**{**web.__dict__, "state": "exited", "exit_code": 137})
    r.note_started([dead])  # the pass read 137 from its list, then started it
    r.refresh([web.id])
    finished["at"] = KILLED  # Docker keeps FinishedAt while it runs again
    pub.sent.clear()
    assert r.report_items(desired, ActualState(containers={web.name: web}), {}) == 1
    report = dict(pub.sent)[topic]
    check_payload("actual-item", report)
    assert report["finished_at"] == KILLED
    assert report["last_exit"] == {"exit_code": 137, "finished_at": KILLED, "restarted_by": "agent"}
    assert report["agent_restarts"] == 1
    pub.sent.clear()
    r.refresh([web.id])
    assert r.report_items(desired, ActualState(containers={web.name: web}), {}) == 0  # byte-stable

    # a new agent: the exit code of that same exit comes back from its retained report
    held = {topic: json.dumps(report, sort_keys=True, separators=(",", ":")).encode()}
    fresh = RecordingPublisher()
    again = ActualReporter(fresh, T, "a", inspect=lambda _c: details_with(KILLED))
    again.adopt(held)
    again.report_items(desired, ActualState(containers={web.name: web}), {})
    assert dict(fresh.sent).get(topic, report) == report

    # ... but never for another exit (Docker restarted it by its policy since)
    later = ActualReporter(fresh, T, "a", inspect=lambda _c: details_with("2026-12-01T18:00:00Z"))
    later.adopt(held)
    fresh.sent.clear()
    later.report_items(desired, ActualState(containers={web.name: web}), {})
    moved = dict(fresh.sent)[topic]
    assert moved["finished_at"] == "2026-12-01T18:00:00Z"
    assert moved["last_exit"] is None and moved["agent_restarts"] == 0


def test_a_created_container_started_for_the_first_time_has_no_last_exit():
    pub = RecordingPublisher()
    r = ActualReporter(pub, T, "a", inspect=lambda _c: details_with(ZERO))
    web = container("e.web.0")
    r.note_started([ObservedContainer(**{**web.__dict__, "state": "created"})])
    r.report_items(spec.desired([spec.container("e", "web")]), ActualState(containers={web.name: web}), {})
    report = dict(pub.sent)[T.actual_item("a", "containers", "e.web.0")]
    assert (report["finished_at"], report["last_exit"], report["agent_restarts"]) == (None, None, 0)
