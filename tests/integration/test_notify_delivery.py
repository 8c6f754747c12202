"""Notifications over real HTTP on 127.0.0.1: a receiver that is down, then answers 500, gets
each transition exactly once when it comes back, and the caller never waits for it."""

from __future__ import annotations

import socket
import threading
import time
from pathlib import Path

from config_sync.notify.delivery import HttpDelivery
from config_sync.notify.events import Target, Transition
from config_sync.notify.notifier import Notifier
from config_sync.notify.outbox import Outbox
from phrame.runtime import Backoff
from tests.support.waiting import wait_for
from tests.support.webhook_receiver import webhook_receiver

A, B = "a" * 40, "b" * 40


def transition(state: str, commit: str) -> Transition:
    return Transition(
        "studio-a", commit, "main", "progressing", state, ("edge-01: no status reported",), at=1.0
    )


def test_a_receiver_down_then_failing_gets_one_message_per_transition(tmp_path: Path) -> None:
    results: list[tuple[str, str]] = []
    with webhook_receiver(answers=[500, 503]) as receiver:
        (tmp_path / "pager.url").write_text(receiver.url + "\n")
        outbox = Outbox(
            HttpDelivery(tmp_path, timeout_s=2),
            attempts=10,
            backoff=Backoff(0.05, 0.2),
            on_result=lambda m, r: results.append((m.event, r)),
        )
        notifier = Notifier(outbox)
        notifier.configure({"studio-a": (Target("pager", "json", "pager.url"),)})
        notifier.start()
        try:
            started = time.monotonic()
            assert notifier.notify(transition("failed", A)) == 1
            assert notifier.notify(transition("failed", A)) == 0  # the same check again
            assert notifier.notify(transition("healthy", B)) == 1
            assert time.monotonic() - started < 0.1, "the caller waited for the receiver"
            # refused while down: retried with backoff, not given up
            wait_for(lambda: ("failed", "retried") in results, "a refused try to be retried")
            assert receiver.received == []
            receiver.listen()  # up, but the first two tries get 500 and 503
            wait_for(lambda: len(receiver.received) == 2, "both transitions", observe=lambda: results)
            assert receiver.events() == ["failed", "recovered"]  # in order, once each
            assert receiver.tries[:2] == [500, 503]
            assert receiver.received[0]["reasons"] == ["edge-01: no status reported"]
            assert receiver.content_types[0] == "application/json; charset=utf-8"
            # the receiver has the body before the outbox reads its answer and records the result
            wait_for(
                lambda: ("recovered", "sent") in results,
                "the second delivery's result",
                observe=lambda: results,
            )
            assert results.count(("failed", "sent")) == 1 and results.count(("recovered", "sent")) == 1
            wait_for(lambda: outbox.pending() == 0, "the outbox empty")
        finally:
            notifier.stop()
    assert len(receiver.received) == 2


def test_a_receiver_refusing_for_good_is_given_up_after_one_try(tmp_path: Path) -> None:
    results: list[tuple[str, str]] = []
    with webhook_receiver(answers=[404]) as receiver:
        receiver.listen()
        (tmp_path / "ops.url").write_text(receiver.url)
        outbox = Outbox(
            HttpDelivery(tmp_path, timeout_s=2),
            backoff=Backoff(0.05, 0.2),
            on_result=lambda m, r: results.append((m.target.name, r)),
        )
        notifier = Notifier(outbox)
        notifier.configure(
            {"studio-a": (Target("ops", "slack", "ops.url"), Target("gone", "json", "gone.url"))}
        )
        notifier.start()
        try:
            notifier.notify(transition("degraded", A))
            wait_for(lambda: len(results) == 2, "both targets judged", observe=lambda: results)
            # a 404 is no passing trouble, nor is a missing URL file: neither is tried again
            assert sorted(results) == [("gone", "failed"), ("ops", "failed")]
            assert receiver.tries == [404]
        finally:
            notifier.stop()


def test_an_answer_that_is_no_http_is_retried(tmp_path: Path) -> None:
    server = socket.create_server(("127.0.0.1", 0))
    garbled = threading.Event()

    def answer_garbage() -> None:
        conn, _ = server.accept()
        with conn:
            conn.recv(65536)
            conn.sendall(b"SMTP READY\r\n\r\n")
        garbled.set()

    threading.Thread(target=answer_garbage, daemon=True).start()
    (tmp_path / "odd.url").write_text(f"http://127.0.0.1:{server.getsockname()[1]}/hook")
    results: list[str] = []
    outbox = Outbox(
        HttpDelivery(tmp_path, timeout_s=2), backoff=Backoff(30, 60), on_result=lambda m, r: results.append(r)
    )
    notifier = Notifier(outbox)
    notifier.configure({"studio-a": (Target("odd", "json", "odd.url"),)})
    try:
        notifier.start()
        notifier.notify(transition("failed", A))
        wait_for(lambda: results, "the first try judged")
        assert garbled.is_set() and results == ["retried"] and outbox.pending() == 1
    finally:
        notifier.stop()
        server.close()
