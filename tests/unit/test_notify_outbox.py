"""config_sync.notify.outbox: retries with backoff on a fake clock, per-target order, bounds."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from config_sync.notify.delivery import read_url
from config_sync.notify.events import Message, Target
from config_sync.notify.outbox import Outbox
from phrame.runtime import Backoff, PermanentError, TemporaryError

OPS, PAGER = Target("ops", "slack", "ops.url"), Target("pager", "json", "pager.url")


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class Receiver:
    """Fails each target's first ``failures[target]`` tries (temporarily, or for good)."""

    def __init__(self, failures: dict[str, int], *, error: type[Exception] = TemporaryError) -> None:
        self.failures, self.error = dict(failures), error
        self.tries: list[tuple[str, bytes]] = []
        self.got: list[tuple[str, bytes]] = []

    def deliver(self, url_file: str, body: bytes, *, target: str) -> None:
        self.tries.append((target, body))
        if self.failures.get(target, 0) > 0:
            self.failures[target] -= 1
            raise self.error(f"{target} answered 500")
        self.got.append((target, body))


def msg(target: Target, event: str) -> Message:
    return Message("studio-a", target, event, "a" * 40, event.encode())


def make(receiver: Receiver, clock: Clock, **kw: object) -> tuple[Outbox, list[tuple[str, str]]]:
    results: list[tuple[str, str]] = []
    box = Outbox(
        receiver,
        backoff=Backoff(1.0, 8.0),
        clock=clock,
        on_result=lambda m, r: results.append((m.target.name, r)),
        **kw,  # type: ignore[arg-type]
    )
    return box, results


def test_a_failing_target_is_retried_with_backoff_and_holds_back_only_its_own_messages() -> None:
    clock, receiver = Clock(), Receiver({"ops": 3})
    box, results = make(receiver, clock)
    box.put(msg(OPS, "failed"))
    box.put(msg(OPS, "recovered"))
    box.put(msg(PAGER, "failed"))
    assert box.run_due() == 1.0  # ops failed once: again after 1 s; pager went through
    assert receiver.got == [("pager", b"failed")]
    # 1 s, 2 s, 4 s between tries (the fake clock moves; nothing sleeps)
    clock.now += 1.0
    assert box.run_due() == 2.0
    clock.now += 2.0
    assert box.run_due() == 4.0
    clock.now += 3.9
    assert box.run_due() == pytest.approx(0.1) and len(receiver.tries) == 4  # not due yet
    clock.now += 0.1
    assert box.run_due() == 0.0  # failed went out; recovered is due at once
    assert box.run_due() is None
    assert receiver.got[1:] == [("ops", b"failed"), ("ops", b"recovered")]
    assert [r for r in results if r[0] == "ops"] == [("ops", "retried")] * 3 + [("ops", "sent")] * 2
    assert box.pending() == 0


def test_tries_are_bounded_and_a_permanent_error_is_not_retried() -> None:
    clock, receiver = Clock(), Receiver({"ops": 99})
    box, results = make(receiver, clock, attempts=3)
    box.put(msg(OPS, "failed"))
    while (wait := box.run_due()) is not None:
        clock.now += wait
    assert len(receiver.tries) == 3 and results[-1] == ("ops", "failed")
    assert clock.now == 3.0  # 1 + 2: the waits between the three tries, no more
    clock, receiver = Clock(), Receiver({"ops": 1}, error=PermanentError)
    box, results = make(receiver, clock)
    box.put(msg(OPS, "failed"))
    box.put(msg(OPS, "recovered"))
    box.run_due()
    box.run_due()
    assert results == [("ops", "failed"), ("ops", "sent")] and receiver.got == [("ops", b"recovered")]


def test_a_full_outbox_drops_and_never_blocks() -> None:
    clock, receiver = Clock(), Receiver({})
    box, results = make(receiver, clock, capacity=2)
    assert box.put(msg(OPS, "failed")) and box.put(msg(PAGER, "failed"))
    assert not box.put(msg(OPS, "recovered"))
    assert results == [("ops", "dropped")] and box.pending() == 2


def test_retry_after_is_followed_up_to_the_backoff_cap() -> None:
    clock = Clock()

    class Busy(Receiver):
        def deliver(self, url_file: str, body: bytes, *, target: str) -> None:
            self.tries.append((target, body))
            if len(self.tries) < 3:
                raise TemporaryError("429", delay=[5.0, 600.0][len(self.tries) - 1])

    box, _ = make(Busy({}), clock)
    box.put(msg(OPS, "failed"))
    assert box.run_due() == 5.0
    clock.now += 5.0
    assert box.run_due() == 8.0  # asked for 600 s: the cap


def write(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


def test_the_url_file_must_hold_one_http_url(tmp_path: Path) -> None:
    write(tmp_path / "ok.url", b"https://hooks.example.test/services/T0/B0/XYZ\n")
    assert read_url(tmp_path, "ok.url") == "https://hooks.example.test/services/T0/B0/XYZ"
    write(tmp_path / "file.url", b"file:///etc/passwd\n")
    write(tmp_path / "two.url", b"https://a.test/\nhttps://b.test/\n")
    write(tmp_path / "big.url", b"https://a.test/" + b"x" * 5000)
    os.symlink(tmp_path / "ok.url", tmp_path / "link.url")
    (tmp_path / "dir.url").mkdir()
    for name, why in [
        ("file.url", "does not hold one http:// or https:// URL"),
        ("two.url", "does not hold one http:// or https:// URL"),
        ("big.url", "more than 4096 bytes"),
        ("link.url", "cannot read"),
        ("dir.url", "not a regular file"),
        ("missing.url", "No such file"),
        ("../ok.url", "is no file name"),
    ]:
        with pytest.raises(PermanentError, match=why):
            read_url(tmp_path, name)
