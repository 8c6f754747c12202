"""Promotion over HTTP with scoped tokens, against a real broker, git remote and uvicorn.

A promotion asked for while the canary wave still progresses is refused (409) and the
rollout still stops at its canary; only a ``deploy`` token of the tokens file promotes (a
``read`` one gets 403, the webhook secret 401 once a tokens file exists), naming the
waiting commit; and the retained audit list names each holder, the action and the commit.
The agents are stood in for by a test client publishing container reports.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from config_sync.reporting import LocalReporter
from config_sync.service import ConfigSync
from phrame.auth import TokenStore
from schemas import check_payload
from tests.integration.test_sync_rollouts import (
    Fleet,
    T,
    _digests,
    _files,
    _rollout,
    fleet,
    remote,
    serving,
)
from tests.support.mosquitto import Mosquitto
from tests.support.services import eventually
from tests.support.sync_support import SECRET, ConfigRemote, desired_on_broker, reader, settings_for

__all__ = ["fleet", "remote"]  # the fixtures, shared with the rollout tests

CANARY_OF_TWO = "  max_parallel: 2\n  canary: 2\n  min_healthy_s: 0.2\n  healthy_deadline_s: 60\n"
ALICE, BOB = "alice-deploy-token", "bob-read-token"


def _audit(broker: dict[str, bytes]) -> list[dict[str, Any]]:
    raw = broker.get(T.audit("config-sync"))
    if not raw:
        return []
    doc = json.loads(raw)
    check_payload("desired-audit", doc)
    return list(doc["entries"])


def _promote(url: str, token: str, body: object | None) -> httpx.Response:
    content = json.dumps(body).encode() if body is not None else b""
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
    return httpx.post(f"{url}/rollouts/lab/web/promote", headers=headers, content=content)


@pytest.mark.slow
def test_promote_waits_for_the_canary_takes_a_deploy_token_and_is_audited(
    tmp_path: Path, mosquitto: Mosquitto, remote: ConfigRemote, fleet: Fleet
) -> None:
    tokens = tmp_path / "tokens.yaml"
    TokenStore.of([("alice", ["deploy"], ALICE), ("bob", ["read"], BOB)], tokens)
    remote.commit("v1", files=_files("web:1", CANARY_OF_TWO))
    settings = settings_for(
        remote,
        tmp_path / "state",
        mosquitto.url,
        poll_s=3600,
        debounce_s=0,
        webhook_secret=SECRET,
        tokens_file=str(tokens),
    )
    service = ConfigSync(settings, reporter=LocalReporter())
    with serving(service) as url, reader(mosquitto.url) as watch:
        try:
            assert eventually(lambda: service.queue.wait_idle(0.1) and service.syncer.last.get("main"), 30)
            old = _digests(desired_on_broker(watch))
            fleet.run_what_is_published(desired_on_broker(watch))
            v2 = remote.commit("v2", files=_files("web:2", CANARY_OF_TWO))
            pushed = time.monotonic()
            service.trigger_sync("main")
            assert eventually(
                lambda: (_rollout(desired_on_broker(watch)) or {}).get("state") == "progressing", 15
            )
            # the finding: a promotion moments after the push, while wave 1 has 0/2 healthy
            assert time.monotonic() - pushed < 10
            early = _promote(url, ALICE, {"commit": v2})
            assert early.status_code == 409, early.text
            assert "nothing to promote: wave 1 is progressing (0/4 healthy)" in early.json()["error"]
            assert service.rollouts.promotions == {}

            def waits() -> bool:  # the agents run what wave 1 publishes: it turns healthy
                broker = desired_on_broker(watch)
                fleet.run_what_is_published(broker)
                return (_rollout(broker) or {}).get("state") == "waiting-promotion"

            assert eventually(waits, 15, interval=0.2)
            state = _rollout(desired_on_broker(watch))
            assert state is not None and not state["promoted"] and state["commit"] == v2
            assert _digests(desired_on_broker(watch))[2:] == old[2:]  # the early promotion released nothing

            assert _promote(url, BOB, {"commit": v2}).status_code == 403  # read only
            assert (
                _promote(url, SECRET, {"commit": v2}).status_code == 401
            )  # GitLab's secret: the webhook only
            assert _promote(url, "guess", {"commit": v2}).status_code == 401
            bare = _promote(url, ALICE, None)
            assert bare.status_code == 400 and v2 in bare.json()["error"]
            wrong = _promote(url, ALICE, {"commit": "0" * 40})
            assert wrong.status_code == 409 and v2[:12] in wrong.json()["error"]
            assert _digests(desired_on_broker(watch))[2:] == old[2:]

            taken = _promote(url, ALICE, {"commit": v2[:8]})
            assert taken.status_code == 202, taken.text
            assert taken.json()["commit"] == v2
            assert eventually(lambda: _digests(desired_on_broker(watch))[2:] != old[2:], 10)

            def audited() -> list[dict[str, Any]]:
                return _audit(desired_on_broker(watch))

            assert eventually(lambda: any(e["result"] == "accepted" for e in audited()), 10)
            entries = audited()
            accepted = [e for e in entries if e["result"] == "accepted"]
            assert accepted == [
                {
                    **accepted[0],
                    "who": "alice",
                    "action": "promote",
                    "target": "lab/web",
                    "commit": v2,
                    "status": 202,
                }
            ]
            assert {"who": "bob", "result": "forbidden", "status": 403}.items() <= next(
                e for e in entries if e["who"] == "bob"
            ).items()
            early_entry = entries[0]
            assert (early_entry["who"], early_entry["result"], early_entry["status"]) == (
                "alice",
                "refused",
                409,
            )
            assert "wave 1 is progressing" in early_entry["detail"]
            assert all(e["who"] != "anonymous" for e in entries)  # unknown tokens are logged, not listed

            # the full /status needs a token of the file (read is enough), no longer the secret
            assert "rollouts" in httpx.get(f"{url}/status", headers={"Authorization": f"Bearer {BOB}"}).json()
            assert (
                "rollouts"
                not in httpx.get(f"{url}/status", headers={"Authorization": f"Bearer {SECRET}"}).json()
            )
            sync = httpx.post(f"{url}/sync", headers={"Authorization": f"Bearer {ALICE}"})
            assert sync.status_code == 403  # /sync is admin
        finally:
            service.stop()
