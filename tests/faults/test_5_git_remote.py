"""Fault 5: the git remote unreachable (the bare repository moved away) for a while, then back.

A sync during the outage fails to fetch: config-sync reports it (the environment's ``sync``
topic, read by the topic API and ``phrame status``; ``/status``: the worker's failures,
``last_error`` and the ref ``retrying``) and keeps the last good state (the sync
topic still names the head as applied; no container changes). When the repository returns,
its own retry succeeds and a new push deploys.
"""

from __future__ import annotations

import time
import urllib.request
from typing import Any

import pytest

from tests.faults.harness import FaultStack, service

pytestmark = [pytest.mark.docker, pytest.mark.mqtt, pytest.mark.slow]
BOUND_S = 30.0


def retrying(status: dict[str, Any]) -> dict[str, int]:
    out: dict[str, int] = {}
    for w in status["workers"].values():
        out |= w["retrying"]
    return out


def unreachable(env: dict[str, Any]) -> bool:
    return any(e.get("rule") == "git-unreachable" for e in env.get("errors") or [])


def test_the_git_remote_unreachable_is_reported_keeps_the_last_state_and_recovers(faults: FaultStack):
    s = faults.stack
    faults.settle("converged before the fault", 60)
    before, unmanaged = faults.snapshot(), faults.unmanaged_state()
    head = s.remote_head()
    bare = s.state / "config.git"
    away = s.state / "config.git.away"
    bare.rename(away)
    try:
        token = (s.state / "webhook-secret").read_text().strip()
        request = urllib.request.Request(
            f"http://127.0.0.1:{s.sync_port}/sync?ref=main",
            method="POST",
            headers={"Authorization": f"Bearer {token}"},
        )
        with urllib.request.urlopen(request, timeout=5) as r:
            assert r.status in (200, 202)
        s.wait(lambda: retrying(s.sync_status()), "config-sync to report the failed fetch", 30)
        errors = [w["last_error"] for w in s.sync_status()["workers"].values() if w["last_error"]]
        assert errors, s.sync_status()["workers"]
        # reported where people look: the sync topic, so the topic API and `phrame status`
        s.wait(lambda: unreachable(s.api(f"api/environments/{s.environment}")), "the API to show it", 15)
        code, doc = faults.status_json()
        (mine,) = [e for e in doc["environments"] if e["environment"] == s.environment]
        assert code == 1 and "cannot fetch" in " ".join(mine["errors"]), (code, mine)
        # the last good state is kept: what the broker and the nodes run is the head before
        env = s.api(f"api/environments/{s.environment}")
        assert env["commit"] == head, env
        assert faults.snapshot() == before
    finally:
        away.rename(bare)
    at = time.monotonic()
    s.wait(lambda: not retrying(s.sync_status()), "config-sync's retry to succeed", BOUND_S)
    faults.verdict("5 git remote unreachable, then back", BOUND_S, at, before, unmanaged)
    # and it deploys again: a change pushed now converges
    node = s.nodes[1]
    s.env_file("services/chain-c.yaml").write_text(
        service("chain-c", node, env="after-outage", depends="chain-b")
    )
    s.commit_and_push("faults: a change after the outage")
    faults.settle("the change after the outage deployed", 60)
