"""The deployment history, purely: a new record supersedes the pending ones,
at most 20 are kept, a pending record converges when its nodes applied their generation
and fails at its deadline naming the node; payloads fit the ``deploys`` schema."""

from __future__ import annotations

import json
from dataclasses import replace

from config_sync.deploys.records import (
    MAX_RECORDS,
    DeployRecord,
    add,
    deployed_environments,
    follow,
    judge,
    payload,
    records_of,
)
from phrame.actual.health import Health, Reason
from schemas import Topics, check_payload

T = Topics()


def rec(n: int, *, at: float = 100.0, nodes: dict[str, int] | None = None) -> DeployRecord:
    return DeployRecord(
        f"{n:040x}", "main", "Ada <ada@x>", f"change {n}", at, {"n1": n} if nodes is None else nodes
    )


def converged(generation: int, commit: str = "x") -> dict:
    return {"state": "online", "commit": commit, "converged": True, "generation": generation}


def test_a_new_record_comes_first_and_supersedes_the_pending_ones() -> None:
    done = judge(rec(1), {"n1": converged(1)}, now=101.0, deadline=200.0)
    history = add([done], rec(2, at=110.0))
    history = add(history, rec(3, at=120.0))
    assert [(r.commit[-1], r.state) for r in history] == [
        ("3", "pending"),
        ("2", "superseded"),
        ("1", "converged"),
    ]
    superseded = history[1]
    assert (superseded.finished_at, superseded.duration_s, superseded.failed) == (120.0, None, None)


def test_at_most_twenty_are_kept_newest_first() -> None:
    history: list[DeployRecord] = []
    for n in range(1, 26):
        history = add(history, rec(n, at=float(n)))
    assert len(history) == MAX_RECORDS == 20
    assert [int(r.commit, 16) for r in history] == list(range(25, 5, -1))
    assert [r.state for r in history] == ["pending"] + ["superseded"] * 19


def test_the_same_commit_again_is_no_new_deployment() -> None:
    history = add([], rec(1))
    assert add(history, rec(1, at=500.0)) == history


def test_a_commit_that_changes_no_node_converges_at_once() -> None:
    (only,) = add([], rec(1, at=100.0, nodes={}))
    assert (only.state, only.finished_at, only.duration_s) == ("converged", 100.0, 0.0)


def test_a_commit_that_changes_no_node_takes_over_a_pending_one() -> None:
    """Its nodes are still converging on the older commit's change: the newer record waits
    for them, so a failure there is still reported (on the record that is current)."""
    history = add([], rec(1, at=100.0, nodes={"n1": 4, "n2": 2}))
    history = add(history, rec(2, at=110.0, nodes={}))
    assert [(r.state, dict(r.nodes)) for r in history] == [
        ("pending", {"n1": 4, "n2": 2}),
        ("superseded", {"n1": 4, "n2": 2}),
    ]


def test_converged_when_every_node_applied_its_generation_or_a_later_one() -> None:
    r = rec(1, at=100.0, nodes={"n1": 3, "n2": 5})
    waiting = judge(r, {"n1": converged(3), "n2": converged(4)}, now=101.0, deadline=200.0)
    assert waiting is r
    done = judge(r, {"n1": converged(4), "n2": converged(5)}, now=102.5, deadline=200.0)
    assert (done.state, done.finished_at, done.duration_s) == ("converged", 102.5, 2.5)


def test_failed_at_the_deadline_naming_the_first_node_and_why() -> None:
    r = rec(1, at=100.0, nodes={"n1": 3, "n2": 3})
    broken = {"state": "online", "converged": False, "generation": 2, "errors": ["pull x:1: denied"]}
    statuses = {"n1": converged(3), "n2": broken}
    assert judge(r, statuses, now=159.0, deadline=160.0) is r
    failed = judge(r, statuses, now=160.0, deadline=160.0)
    assert (failed.state, failed.failed, failed.duration_s) == ("failed", ("n2", "pull x:1: denied"), 60.0)
    silent = judge(
        r, {"n1": converged(3)}, now=170.0, deadline=160.0, offline={"n2": "no heartbeat for 45 s"}
    )
    assert silent.failed == ("n2", "offline (no heartbeat for 45 s)")
    assert judge(failed, {"n2": converged(9)}, now=999.0, deadline=160.0) is failed  # final


def test_payload_fits_the_schema_and_reads_back_the_same() -> None:
    history = add([judge(rec(1), {}, now=130.0, deadline=120.0)], rec(2, at=140.0))
    doc = payload("prod", history)
    check_payload("desired-deploys", doc)
    assert doc["deploys"][1]["failed"] == {"node": "n1", "reason": "no status reported"}
    assert records_of(json.loads(json.dumps(doc))) == history


def test_deployed_environments_are_those_whose_items_or_services_changed() -> None:
    messages = [
        (T.desired_item("n1", "containers", "prod.web.0"), b"{}"),
        (T.desired_item("n2", "containers", "prod.db.0"), None),  # removed: a change too
        (T.env_service("docs", "wiki"), b"{}"),  # a declared service only: no node
        (T.manifest("n1"), b"{}"),
        (T.env_sync("prod"), b"{}"),
        (T.env_sync("lab"), b"{}"),  # a new commit, nothing of lab changed: no record
        (T.env_sync("old"), None),  # removed environment
    ]
    changed, gone = deployed_environments(messages, {"n1": 7, "n2": 3}, T)
    assert changed == {"prod": {"n1": 7, "n2": 3}, "docs": {}}
    assert gone == {"old"}


def test_a_staged_rollouts_next_wave_joins_its_record_and_the_promotion_wait_is_apart() -> None:
    from phrame.actual.health import Health, Reason

    wave1 = {"service": "web", "wave": 1, "released_at": 100.0, "replicas": ["lab.web.0"], "nodes": ["n1"]}
    wave2 = {"service": "web", "wave": 2, "released_at": 300.0, "replicas": ["lab.web.1"], "nodes": ["n2"]}
    first = replace(rec(1, at=100.0, nodes={"n1": 2}), replicas={"lab.web.0": "n1"}, waves=(wave1,))
    history = add([], first)
    waiting = Health("suspended", (Reason("", "web", "staged rollout waiting-promotion"),))
    held = judge(history[0], {}, now=110.0, deadline=150.0, health=waiting)
    assert (held.state, held.health, held.suspended_since) == ("pending", "suspended", 110.0)
    # the deadline does not run while a person is asked to promote
    assert judge(held, {}, now=400.0, deadline=150.0, health=waiting).state == "pending"
    next_wave = replace(rec(1, at=300.0, nodes={"n2": 3}), replicas={"lab.web.1": "n2"}, waves=(wave1, wave2))
    (merged,) = add([judge(held, {}, now=300.0, deadline=150.0, health=Health("progressing"))], next_wave)
    assert (dict(merged.nodes), dict(merged.replicas)) == (
        {"n1": 2, "n2": 3},
        {"lab.web.0": "n1", "lab.web.1": "n2"},
    )
    done = judge(merged, {}, now=320.0, deadline=150.0, health=Health("healthy"))
    assert (done.state, done.health, done.suspended_s, done.suspended_since) == (
        "converged",
        "healthy",
        190.0,
        None,
    )
    assert done.duration_s == 320.0 - 100.0 - 190.0
    # each wave's working time apart from the wait for its promotion
    assert [(w["wave"], w["took_s"], w["waited_s"]) for w in done.waves] == [(1, 10.0, 190.0), (2, 20.0, 0.0)]
    doc = payload("lab", [done])
    check_payload("desired-deploys", doc)
    assert records_of(json.loads(json.dumps(doc))) == [done]


def test_failed_or_degraded_as_soon_as_the_health_says_so() -> None:
    from phrame.actual.health import Health, Reason

    unassigned = Health("degraded", (Reason("", "lab.gpu.0", "unassigned: no node has gpu=true"),))
    r = replace(rec(1, at=100.0, nodes={}), replicas={"lab.gpu.0": None})
    (pending,) = add([], r)
    assert pending.state == "pending"  # a replica with no node: never converged at once
    degraded = judge(pending, {}, now=101.0, deadline=700.0, health=unassigned)
    assert (degraded.state, degraded.failed) == (
        "degraded",
        ("", "lab.gpu.0: unassigned: no node has gpu=true"),
    )
    assert degraded.reasons == (
        {"node": "", "replica": "lab.gpu.0", "reason": "unassigned: no node has gpu=true"},
    )
    pull = Health("failed", (Reason("n1", "", "create lab.web.0: pull x:1: not found"),))
    failed = judge(rec(2, at=100.0), {}, now=102.0, deadline=700.0, health=pull)
    assert (failed.state, failed.failed, failed.duration_s) == (
        "failed",
        ("n1", "create lab.web.0: pull x:1: not found"),
        2.0,
    )


CRASH = Health("degraded", (Reason("n1", "prod.web.0", "crash-looping: restarted 5 times"),))


def test_the_newest_finished_record_follows_verdict_words_only() -> None:
    """After a deployment ended its record's health follows the environment: a new verdict
    word (degraded, failed, healthy again) is taken with its reasons; a passing word
    (progressing, unknown, suspended) and a pending or superseded record change nothing."""
    done = judge(rec(1), {"n1": converged(1)}, now=101.0, deadline=200.0)
    assert (done.state, done.health) == ("converged", "healthy")
    table = [
        # (record, health judged now) -> (its health, reasons) after, or None: the same object
        (done, Health("healthy"), None),
        (done, Health("progressing", (Reason("n1", "prod.web.0", "restarting"),)), None),
        (done, Health("unknown", (Reason("n1", "", "not reporting"),)), None),
        (done, Health("suspended"), None),
        (done, CRASH, ("degraded", ({"node": "n1", "replica": "prod.web.0", "reason": CRASH.reasons[0].reason},))),
        (done, Health("failed", (Reason("n1", "", "pull failed"),)), ("failed", ({"node": "n1", "replica": "", "reason": "pull failed"},))),
        (follow(done, CRASH), Health("healthy"), ("healthy", ())),
        (follow(done, CRASH), CRASH, None),  # the same word: not rewritten on every tick
        (rec(2), CRASH, None),  # pending: judge() decides it
        (replace(done, state="superseded"), CRASH, None),
    ]  # fmt: skip
    for record, health, after in table:
        followed = follow(record, health)
        if after is None:
            assert followed is record, (record.state, record.health, health)
        else:
            assert (followed.health, followed.reasons) == after, (record.health, health)
            assert (followed.state, followed.finished_at, followed.failed) == (
                record.state,
                record.finished_at,
                record.failed,
            )
    check_payload("desired-deploys", payload("prod", [follow(done, CRASH)]))
