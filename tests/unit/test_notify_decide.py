"""config_sync.notify: which transitions are sent, to whom, once (pure decisions, no I/O)."""

from __future__ import annotations

from config_sync.notify.decide import Decision, Memory, decide, open_problem, recipients
from config_sync.notify.events import EVENTS, Target, Transition
from config_sync.notify.notifier import Notifier
from config_sync.notify.outbox import Outbox

A, B = "a" * 40, "b" * 40


def t(state: str, commit: str = A, previous: str = "progressing", env: str = "studio-a") -> Transition:
    return Transition(env, commit, "main", previous, state, ("edge-01: pull failed",), at=1.0)


def run(states: list[tuple[str, str]]) -> list[str | None]:
    """The events a sequence of (state, commit) transitions of one environment sends."""
    memory: Memory | None = None
    sent = []
    for state, commit in states:
        d = decide(memory, t(state, commit))
        memory = d.memory
        sent.append(d.event)
    return sent


def test_problems_are_sent_once_per_commit_and_state() -> None:
    assert run([("failed", A), ("failed", A), ("degraded", A), ("degraded", A)]) == [
        "failed",
        None,
        "degraded",
        None,
    ]
    # the same state at a new commit is a new deployment's failure
    assert run([("failed", A), ("progressing", B), ("failed", B)]) == ["failed", None, "failed"]


def test_recovered_only_after_a_problem_and_once() -> None:
    assert run([("healthy", A), ("progressing", B), ("healthy", B)]) == [None, None, None]
    # a later commit brings the environment back: that is the recovery
    assert run([("failed", A), ("progressing", B), ("healthy", B), ("healthy", B)]) == [
        "failed",
        None,
        "recovered",
        None,
    ]
    # a flap sends one message per transition
    assert run([("degraded", A), ("healthy", A), ("degraded", A), ("healthy", A)]) == [
        "degraded",
        "recovered",
        "degraded",
        "recovered",
    ]
    assert run([("suspended", A), ("unknown", A), ("healthy", A)]) == ["suspended", None, "recovered"]


def test_the_health_after_a_deployment_ended_is_sent_once_per_transition() -> None:
    """A deployment converged (nothing sent), its environment later degrades, flaps through
    passing words, fails, recovers: one message per transition into a problem, one
    recovery, nothing for unknown or progressing, nothing again for a repeated tick."""
    table = [
        ("healthy", A, None),  # the deployment converged: no problem, nothing to say
        ("healthy", A, None),
        ("degraded", A, "degraded"),  # a replica crash-loops later
        ("degraded", A, None),  # every tick
        ("unknown", A, None),  # a node not heard for a while
        ("degraded", A, None),  # still the same problem
        ("failed", A, "failed"),  # its container cannot be created again
        ("healthy", A, "recovered"),
        ("healthy", A, None),
        ("unknown", A, None),  # a node stops reporting: no message
        ("healthy", A, None),
        ("degraded", A, "degraded"),  # a new degradation of the same commit
        ("healthy", B, "recovered"),  # a later deployment mends it
    ]
    assert run([(state, commit) for state, commit, _ in table]) == [sent for *_, sent in table]


def test_the_problem_open_after_a_restart_follows_the_records_health() -> None:
    table = [
        # (record state, its health) -> the problem remembered
        ("failed", "failed", "failed"),
        ("failed", "unknown", "failed"),  # timed out, its nodes not reporting
        ("degraded", "degraded", "degraded"),
        ("converged", "healthy", None),
        ("converged", "degraded", "degraded"),  # degraded after it converged
        ("converged", "failed", "failed"),
        ("failed", "healthy", None),  # it recovered since: sent
        ("degraded", "healthy", None),
    ]
    assert [open_problem(state, health) for state, health, _ in table] == [p for *_, p in table]


def test_recipients_follow_on_and_recovery_needs_the_problem_too() -> None:
    every = Target("all", "json", "all.url")
    failures = Target("pager", "json", "pager.url", frozenset({"failed", "recovered"}))
    quiet = Target("quiet", "slack", "q.url", frozenset({"degraded"}))
    targets = [every, failures, quiet]
    assert recipients(targets, Decision("failed", None)) == [every, failures]
    assert recipients(targets, Decision("degraded", None)) == [every, quiet]
    assert recipients(targets, Decision("recovered", None, recovered_from="failed")) == [every, failures]
    # pager heard nothing of the degradation, so nothing of its end
    assert recipients(targets, Decision("recovered", None, recovered_from="degraded")) == [every]
    assert recipients(targets, Decision(None, None)) == []
    assert every.on == frozenset(EVENTS)


class Recorder:
    def __init__(self) -> None:
        self.calls: list[tuple[str, bytes, str]] = []

    def deliver(self, url_file: str, body: bytes, *, target: str) -> None:
        self.calls.append((url_file, body, target))


def test_the_notifier_queues_one_message_per_target_and_transition_and_remembers_restarts() -> None:
    outbox = Outbox(Recorder(), clock=lambda: 0.0)
    notifier = Notifier(outbox)
    notifier.configure(
        {
            "studio-a": (
                Target("ops", "slack", "ops.url"),
                Target("pager", "json", "p.url", frozenset({"failed"})),
            )
        }
    )
    assert notifier.notify(t("failed")) == 2
    assert notifier.notify(t("failed")) == 0  # a repeated check
    assert notifier.notify(t("healthy", B)) == 1  # pager takes no recovered
    assert notifier.notify(t("failed", env="studio-b")) == 0  # no targets there
    assert [
        (m.environment, m.target.name, m.event)
        for lane in outbox.lanes.values()
        for m in (p.message for p in lane)
    ] == [
        ("studio-a", "ops", "failed"),
        ("studio-a", "ops", "recovered"),
        ("studio-a", "pager", "failed"),
    ]
    # after a restart the history says studio-a failed at A: not sent again, its recovery is
    again = Notifier(Outbox(Recorder(), clock=lambda: 0.0))
    again.configure({"studio-a": (Target("ops", "slack", "ops.url"),)})
    again.remember("studio-a", A, "failed")
    assert again.notify(t("failed")) == 0
    assert again.notify(t("healthy", B)) == 1
    # an environment configured with no targets any more gets none
    again.configure({"studio-a": ()})
    assert again.notify(t("failed", B)) == 0 and again.outbox.pending() == 1


def test_a_transition_before_the_targets_are_read_waits_for_them() -> None:
    """Just after a restart the deploy watcher may judge a deployment before the first sync
    read the environment's notify: targets; the transition is decided once they are."""
    outbox = Outbox(Recorder(), clock=lambda: 0.0)
    notifier = Notifier(outbox)
    notifier.remember("studio-a", A, "failed")
    assert notifier.notify(t("healthy", B)) == 0 and outbox.pending() == 0
    assert notifier.notify(t("failed", A, env="studio-b")) == 0
    notifier.configure({"studio-a": (Target("ops", "json", "ops.url"),)})
    assert [p.message.event for lane in outbox.lanes.values() for p in lane] == ["recovered"]
    notifier.configure({"studio-b": ()})  # no targets there: decided, nothing sent
    assert outbox.pending() == 1 and notifier.waiting == {}
    assert notifier.memory["studio-b"].problem == "failed"
