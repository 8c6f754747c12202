"""The topic API forwards promote and rollback to config-sync (real processes and HTTP).

The caller's bearer token and body go through unchanged and config-sync's answer comes back
as it is (config-sync alone judges the deploy scope, against the tokens file both share);
without PHRAME_CONFIG_SYNC_URL it is 503, config-sync away 502, config-sync silent 504.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from config_sync.reporting import LocalReporter
from config_sync.service import ConfigSync
from phrame.auth import TokenStore
from tests.integration.test_sync_rollouts import serving
from tests.support.mosquitto import Mosquitto
from tests.support.services import eventually, free_port
from tests.support.sync_support import SAMPLE, SECRET, ConfigRemote, settings_for
from tests.support.topic_api import ApiStack

DEPLOYER, READER = "erin-deploy-token", "frank-read-token"


@contextmanager
def silent_http() -> Iterator[str]:
    """An http:// URL whose server accepts connections and never answers."""
    server = socket.create_server(("127.0.0.1", 0))
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        server.settimeout(0.1)
        while not stop.is_set():
            try:
                held.append(server.accept()[0])
            except TimeoutError:
                continue
            except OSError:
                return

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.getsockname()[1]}"
    finally:
        stop.set()
        thread.join(5)
        for conn in held:
            conn.close()
        server.close()


@pytest.mark.slow
def test_promote_and_rollback_reach_config_sync_with_the_callers_token(
    tmp_path: Path, mosquitto: Mosquitto
) -> None:
    tokens = tmp_path / "tokens.yaml"
    TokenStore.of([("erin", ["deploy"], DEPLOYER), ("frank", ["read"], READER)], tokens)
    remote = ConfigRemote(tmp_path / "git")
    first = remote.commit("sample", copy_from=SAMPLE)
    settings = settings_for(
        remote,
        tmp_path / "state",
        mosquitto.url,
        poll_s=3600,
        debounce_s=0,
        tokens_file=str(tokens),
        webhook_secret=SECRET,
    )
    service = ConfigSync(settings, reporter=LocalReporter())
    with serving(service) as sync_url:
        api = ApiStack(
            mosquitto.url, tmp_path / "api", token=None,
            PHRAME_TOKENS_FILE=str(tokens), PHRAME_CONFIG_SYNC_URL=sync_url,
        ).start(mirrors=False)  # fmt: skip
        try:
            assert eventually(lambda: service.syncer.last.get("main"), 30)
            # config-sync judges the token: a read one is refused by it (403), and audited there
            forbidden = api.post("/api/environments/studio-a/rollback", token=READER, json={"to": first})
            assert forbidden.status_code == 403 and "this needs deploy" in forbidden.json()["error"]
            assert api.post("/api/environments/studio-a/rollback", token=None, json={}).status_code == 401
            # its refusals come back as they are
            same = api.post("/api/environments/studio-a/rollback", token=DEPLOYER, json={"to": first})
            assert same.status_code == 409 and "already as at" in same.json()["error"]
            promote = api.post("/api/rollouts/studio-a/mixer/promote", token=DEPLOYER, json={"commit": first})
            assert promote.status_code == 409, promote.text
            assert api.post("/api/environments/Bad_Name/rollback", token=DEPLOYER).status_code == 400
            # and a rollback that is made, answered 201 with the commit config-sync pushed
            second = remote.commit("readme", files={"environments/studio-a/README.md": "notes\n"})
            service.git.fetch()
            made = api.post("/api/environments/studio-a/rollback", token=DEPLOYER, json={"to": first})
            assert made.status_code == 201, made.text
            doc = made.json()
            assert (doc["status"], doc["to"], doc["files"]) == (
                "pushed",
                first,
                ["environments/studio-a/README.md"],
            )
            assert service.git.head("main") != second and service.git.first_parent(doc["commit"]) == second
        finally:
            api.stop()

    # without config-sync: unset, away, silent
    bare = ApiStack(mosquitto.url, tmp_path / "bare", token=None).start(mirrors=False)
    try:
        unset = bare.post("/api/environments/studio-a/rollback", token=DEPLOYER)
        assert unset.status_code == 503 and "PHRAME_CONFIG_SYNC_URL" in unset.json()["error"]
    finally:
        bare.stop()
    away = ApiStack(
        mosquitto.url, tmp_path / "away", token=None, PHRAME_CONFIG_SYNC_URL=f"http://127.0.0.1:{free_port()}"
    ).start(mirrors=False)
    try:
        gone = away.post("/api/rollouts/studio-a/mixer/promote", token=DEPLOYER, json={})
        assert gone.status_code == 502 and "cannot reach config-sync" in gone.json()["error"]
    finally:
        away.stop()
    with silent_http() as url:
        slow = ApiStack(
            mosquitto.url, tmp_path / "slow", token=None,
            PHRAME_CONFIG_SYNC_URL=url, PHRAME_CONFIG_SYNC_TIMEOUT_S="0.5",
        ).start(mirrors=False)  # fmt: skip
        try:
            late = slow.post("/api/environments/studio-a/rollback", token=DEPLOYER, json={})
            assert late.status_code == 504 and "within 0.5 s" in late.json()["error"]
        finally:
            slow.stop()
