"""The deploy watcher's thread is woken by news only when it may check: a status that
arrives while it pauses after a check (its duty gap) does not wake it, as it checks when
the pause ends anyway (at 10,000 nodes statuses came a few hundred microseconds apart,
each waking it only to wait again)."""

from __future__ import annotations

import time
from typing import Any

from config_sync.deploys.watcher import DeployWatcher
from phrame.actual import Change
from schemas import Topics


class Reporter:
    def set_status(self, *args: Any, **kwargs: Any) -> None:
        pass


def test_news_during_the_pause_after_a_check_does_not_wake_the_thread() -> None:
    w = DeployWatcher(Reporter(), Topics(), timeout_s=60)  # type: ignore[arg-type]
    # its loop is not started: a wake is kept as the flag the loop's next wait would take
    status = Change("status", "n1", status={"state": "online", "generation": 2})
    w._next_check_at = time.monotonic() + 60  # pausing after an expensive check
    w.on_change(status)
    assert not w._loop._woken and w.statuses["n1"]["generation"] == 2  # stored, not woken
    w._next_check_at = 0.0  # free to check
    w.on_change(status)
    assert w._loop._woken
