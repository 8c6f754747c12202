"""phrame/deploy of nodes already converged when the watch starts (a staged rollout hands its
nodes over once they are): the watcher thread's tick may judge the deployment between its
registration and the ``running`` report, and must not have ``success`` overwritten by it."""

from __future__ import annotations

import json
from typing import Any

from config_sync.deploys.watcher import DeployWatcher
from config_sync.reporting import LocalReporter
from phrame.mqtt import Message
from schemas import Topics

T = Topics()
SHA = "a" * 40


class RacingReporter(LocalReporter):
    """Lets the watcher thread's tick run while a ``running`` report is on its way (as a slow
    GitLab call would), so that report lands after whatever the tick reported."""

    def __init__(self) -> None:
        super().__init__()
        self.watcher: DeployWatcher | None = None

    def set_status(self, sha: str, name: str, state: str, description: str, **kw: Any) -> None:
        if state == "running" and self.watcher is not None:
            self.watcher.check()  # the tick, in between
        super().set_status(sha, name, state, description, **kw)


def test_a_converged_deploy_ends_success_whatever_the_tick_does_meanwhile() -> None:
    reporter = RacingReporter()
    watcher = DeployWatcher(reporter, T, timeout_s=60)
    reporter.watcher = watcher
    doc = {"state": "online", "commit": SHA, "converged": True, "generation": 7}
    watcher.view.on_message(Message(T.status("n1"), json.dumps(doc).encode(), True))
    watcher.watch("main", SHA, {"n1": 7})
    states = [s["state"] for s in reporter.snapshot()["statuses"] if s["name"] == "phrame/deploy"]
    assert states[-1] == "success", states
    assert "main" not in watcher.active
