"""Fault 6: 500 webhooks in about 10 s, with duplicate and out-of-order shas, while commits land.

Every delivery is answered 202 (each has its own ``Idempotency-Key``, as distinct GitLab
deliveries do); config-sync runs a handful of syncs, not one per delivery; the end state is
the head of main (config-sync always syncs the current head, never the payload's sha).
"""

from __future__ import annotations

import json
import random
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import pytest

from tests.faults.harness import DEBOUNCE_S, FaultStack, service

pytestmark = [pytest.mark.docker, pytest.mark.mqtt, pytest.mark.slow]
BOUND_S = 60.0
DELIVERIES = 500
SPREAD_S = 9.0  # sent at an even pace over this many seconds
COMMITS = 5
# at most one sync per debounce window of the storm, plus each commit's own hook and its
# follow-up: about 28, not 500
MAX_SYNCS = int(SPREAD_S / DEBOUNCE_S) + 2 * COMMITS


def syncs(status: dict[str, Any]) -> int:
    return sum(int(w["runs"]) for w in status["workers"].values())


def test_a_webhook_storm_is_answered_and_folded_into_a_few_syncs(faults: FaultStack):
    s = faults.stack
    node = s.nodes[0]
    faults.settle("converged before the fault", 60)
    before, unmanaged = faults.snapshot(), faults.unmanaged_state()
    shas = s.git("log", "--format=%H", "-n", "10", "origin/main").split()
    runs_before = syncs(s.sync_status())
    token = (s.state / "webhook-secret").read_text().strip()
    rng = random.Random(14)
    landed = threading.Event()

    def land() -> None:  # commits land while the storm blows
        for i in range(COMMITS):
            s.env_file("services/fa1.yaml").write_text(service("fa1", node, env=f"storm-{i}"))
            sha, _ = s.commit_and_push(f"faults: commit {i} during the webhook storm")
            shas.append(sha)
        landed.set()

    def deliver(http: httpx.Client, i: int, sha: str) -> int:
        body = {"object_kind": "push", "ref": "refs/heads/main", "after": sha, "checkout_sha": sha}
        headers = {
            "X-Gitlab-Event": "Push Hook",
            "X-Gitlab-Token": token,
            "Idempotency-Key": f"storm-{s.prefix}-{i}",
            "Content-Type": "application/json",
        }
        return http.post("/webhooks/gitlab", content=json.dumps(body), headers=headers).status_code

    pusher = threading.Thread(target=land)
    start = time.monotonic()
    pusher.start()
    with (
        httpx.Client(base_url=f"http://127.0.0.1:{s.sync_port}", timeout=30) as http,
        ThreadPoolExecutor(8) as pool,
    ):
        futures = []
        for i in range(DELIVERIES):
            time.sleep(max(0.0, start + i * SPREAD_S / DELIVERIES - time.monotonic()))  # the pace
            futures.append(pool.submit(deliver, http, i, rng.choice(shas)))  # repeats, old shas
        codes = [f.result() for f in futures]
    sent_s = time.monotonic() - start
    pusher.join(120)
    assert landed.is_set(), "the commits did not land"
    at = time.monotonic()
    print(f"\n{DELIVERIES} webhooks sent in {sent_s:.1f} s")
    assert codes == [202] * DELIVERIES, {c: codes.count(c) for c in set(codes)}
    faults.verdict(
        "6 500 webhooks in 10 s while 5 commits land", BOUND_S, at, before, unmanaged, expect_changed={"fa1"}
    )
    ran = syncs(s.sync_status()) - runs_before
    print(f"syncs for {DELIVERIES} webhooks and {COMMITS} pushes: {ran}")
    assert 1 <= ran <= MAX_SYNCS, ran
    (fa1,) = [c for c in faults.managed() if c.labels.get("io.phrame.service") == "fa1"]
    assert f"ROUND=storm-{COMMITS - 1}" in fa1.attrs["Config"]["Env"]  # the head's, not an older sha's
