"""Pure parts of config-sync's HTTP hardening: the delivery cache's memory, the review
queue's bound, the token check, the start-up refusal without a secret, and the log
filter that turns a flood of one error into one line per interval."""

from __future__ import annotations

import logging
import tracemalloc
from pathlib import Path

import pytest

from config_sync.app import Deliveries, create_app
from config_sync.errors import SettingsError
from config_sync.intake.queue import Worker
from config_sync.intake.webhooks import is_token_valid
from config_sync.service import ConfigSync
from config_sync.settings import SyncSettings
from phrame.settings.logs import FloodFilter


def test_delivery_keys_take_fixed_memory_whatever_their_length() -> None:
    seen = Deliveries(size=10_000)
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for i in range(2_000):
            assert seen.is_new(f"key:{i:06d}" + "k" * 15_000)
        grown = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert grown < 2_000 * 400, f"{grown} bytes kept for 2,000 keys"  # 30 MB before
    assert not seen.is_new("key:000001" + "k" * 15_000)  # still deduplicated
    assert seen.is_new("key:000001" + "k" * 14_999)


def test_deliveries_forget_a_key() -> None:
    seen = Deliveries(size=3)
    assert seen.is_new("a") and not seen.is_new("a")
    seen.forget("a")
    assert seen.is_new("a")
    for k in "bcd":
        seen.is_new(k)
    assert seen.is_new("a")  # evicted as the oldest of four


def test_a_bounded_worker_refuses_new_keys_when_full_but_coalesces_known_ones() -> None:
    worker = Worker("reviews", max_pending=3)  # not started: nothing drains
    assert [worker.trigger(f"mr:{i}", lambda: None) for i in range(5)] == [True, True, True, False, False]
    assert worker.queued == 3
    assert worker.trigger("mr:1", lambda: None)  # the latest job of a pending key wins
    assert worker.queued == 3


@pytest.mark.parametrize(
    ("expected", "given", "ok"),
    [
        ("s", "s", True),
        ("s", "t", False),
        ("s", None, False),
        ("", "", False),
        (None, "", False),
        (None, None, False),
    ],
)
def test_token_check_never_accepts_an_empty_secret(expected: str | None, given: str | None, ok: bool) -> None:
    assert is_token_valid(expected, given) is ok


def test_the_app_refuses_to_build_without_a_secret(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    plain = SyncSettings(repo_url=str(tmp_path / "r.git"), state_dir=str(tmp_path))
    with pytest.raises(SettingsError, match="PHRAME_INSECURE_NO_WEBHOOK_SECRET"):
        create_app(ConfigSync(plain), manage_lifecycle=False)
    with pytest.raises(SettingsError, match="empty"):
        SyncSettings(repo_url="x", state_dir=str(tmp_path), webhook_secret="")
    insecure = SyncSettings(repo_url="x", state_dir=str(tmp_path), insecure_no_webhook_secret=True)
    with caplog.at_level(logging.WARNING):
        create_app(ConfigSync(insecure), manage_lifecycle=False)
    assert any("INSECURE" in r.getMessage() and r.levelno >= logging.WARNING for r in caplog.records)


def test_an_empty_secret_file_is_refused(tmp_path: Path) -> None:
    empty = tmp_path / "secret"
    empty.write_text("\n")
    with pytest.raises(SettingsError, match="empty"):
        SyncSettings.from_env({"PHRAME_REPO_URL": "x", "PHRAME_WEBHOOK_SECRET_FILE": str(empty)})


def test_flood_filter_turns_a_flood_into_one_line_per_interval() -> None:
    now = [0.0]
    flood = FloodFilter(("out of system resource",), interval_s=10.0, clock=lambda: now[0])

    def record(msg: str) -> logging.LogRecord:
        return logging.LogRecord("asyncio", logging.ERROR, __file__, 1, msg, None, None)

    passed = [flood.filter(record("socket.accept() out of system resource")) for _ in range(10_000)]
    assert passed.count(True) == 1
    assert flood.filter(record("something else")) is True
    now[0] = 10.5
    later = record("socket.accept() out of system resource")
    assert flood.filter(later) is True
    assert "9999 more" in later.getMessage() and later.exc_info is None
