"""The config-sync app under hostile or careless clients, over real uvicorn on 127.0.0.1.

Bad Unicode in echoed fields, absurd merge-request iids, a flood of reviews, slow and
abandoned bodies, and what ``/status`` shows with and without the token.
"""

from __future__ import annotations

import io
import json
import logging
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from config_sync.reporting import LocalReporter
from config_sync.service import ConfigSync
from phrame.settings.http_serving import HttpLimits
from tests.integration.test_sync_app import Running, delivery, serving
from tests.support.mosquitto import Mosquitto
from tests.support.services import wait_until
from tests.support.sync_support import SAMPLE, SECRET, WEBHOOKS, ConfigRemote, settings_for

BODY_TIMEOUT_S = 1.0
HEADER_TIMEOUT_S = 2.0
AUTH = {"Authorization": f"Bearer {SECRET}"}


@pytest.fixture
def hostile(tmp_path: Path, mosquitto: Mosquitto) -> Iterator[Running]:
    remote = ConfigRemote(tmp_path)
    remote.commit("sample", copy_from=SAMPLE)
    limits = HttpLimits(body_timeout_s=BODY_TIMEOUT_S, header_timeout_s=HEADER_TIMEOUT_S)
    settings = settings_for(
        remote, tmp_path / "state", mosquitto.url, webhook_secret=SECRET, poll_s=3600, http=limits
    )
    service = ConfigSync(settings, reporter=LocalReporter())
    with serving(service) as url:
        r = Running(service, url, remote)
        r.idle()
        yield r
        r.http.close()


def _raw(port: int, head: bytes, body: bytes) -> socket.socket:
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    s.sendall(head + body)
    return s


def _webhook_head(length: int, key: str) -> bytes:
    return (
        "POST /webhooks/gitlab HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        f"X-Gitlab-Token: {SECRET}\r\nX-Gitlab-Event: Push Hook\r\nIdempotency-Key: {key}\r\n"
        f"Content-Length: {length}\r\n\r\n"
    ).encode()


def _metric(running: Running, result: str) -> float:
    for line in running.http.get("/metrics").text.splitlines():
        if line.startswith(f'phrame_config_sync_webhooks_total{{result="{result}"}}'):
            return float(line.split()[-1])
    return 0.0


def test_a_lone_surrogate_is_a_400_and_the_retry_is_not_a_duplicate(hostile: Running) -> None:
    headers, _ = delivery("push.json", **{"Idempotency-Key": "surrogate-1"})
    bad = b'{"ref": "refs/heads/\\ud800", "after": "1"}'
    answer = hostile.http.post("/webhooks/gitlab", content=bad, headers=headers)
    assert answer.status_code == 400, answer.text
    assert "Unicode" in answer.json()["error"]
    mr_headers, mr_body = delivery("merge-request-open.json", **{"Idempotency-Key": "surrogate-2"})
    doc = json.loads(mr_body)
    doc["object_attributes"]["source_branch"] = "\ud800"
    answer = hostile.http.post("/webhooks/gitlab", content=json.dumps(doc).encode(), headers=mr_headers)
    assert answer.status_code == 400, answer.text
    # GitLab retries with the same key: the corrected delivery is not taken for a duplicate
    retry = hostile.post("push.json", **{"Idempotency-Key": "surrogate-1"})
    assert retry.status_code == 202, retry.text


@pytest.mark.parametrize("iid", [-1, 0, 10**4000, 2**31])
def test_merge_request_iids_out_of_range_are_refused_with_the_reason(hostile: Running, iid: int) -> None:
    headers, body = delivery("merge-request-open.json", **{"Idempotency-Key": f"iid-{iid % 1000}"})
    doc = json.loads(body)
    doc["object_attributes"]["iid"] = iid
    answer = hostile.http.post("/webhooks/gitlab", content=json.dumps(doc).encode(), headers=headers)
    assert answer.status_code == 400, answer.text
    assert "iid" in answer.json()["error"]


def test_reviews_are_bounded_and_coalesce_per_merge_request(hostile: Running) -> None:
    hostile.service.max_pending_reviews = 5
    reviews = hostile.service.queue.worker("reviews")
    headers, body = delivery("merge-request-open.json")
    doc = json.loads(body)
    answers = []
    for i in range(20):  # inside the debounce (0.5 s): nothing runs before all are in
        doc["object_attributes"]["iid"] = 100 + i % 10
        h = {**headers, "Idempotency-Key": f"flood-{i}"}
        answers.append(hostile.http.post("/webhooks/gitlab", content=json.dumps(doc).encode(), headers=h))
    assert reviews.queued <= 5
    statuses = [a.json()["status"] for a in answers]
    assert statuses[:5] == ["queued"] * 5
    assert "dropped" in statuses
    assert all("review queue full" in a.json()["reason"] for a in answers if a.json()["status"] == "dropped")
    assert all(a.status_code < 500 for a in answers)
    # the same merge request again replaces its pending review instead of taking a place
    doc["object_attributes"]["iid"] = 100
    again = hostile.http.post(
        "/webhooks/gitlab", content=json.dumps(doc).encode(), headers={**headers, "Idempotency-Key": "again"}
    )
    assert again.json()["status"] == "queued"


def test_a_stalled_body_gets_408_within_the_body_timeout(hostile: Running) -> None:
    port = int(hostile.url.rsplit(":", 1)[1])
    started = time.monotonic()
    with _raw(port, _webhook_head(100, "stalled"), b'{"ref"') as s:
        answer = s.recv(4096)
    assert answer.startswith(b"HTTP/1.1 408"), answer[:200]
    assert time.monotonic() - started < BODY_TIMEOUT_S + 3
    assert hostile.http.get("/healthz").status_code == 200


def test_a_client_hanging_up_mid_body_logs_one_line_and_no_traceback(hostile: Running) -> None:
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    watched = [logging.getLogger(n) for n in ("uvicorn.error", "config_sync", "starlette", "asyncio")]
    for logger in watched:
        logger.addHandler(handler)
    try:
        port = int(hostile.url.rsplit(":", 1)[1])
        before = _metric(hostile, "disconnected")
        s = _raw(port, _webhook_head(100, "gone"), b'{"ref"')
        time.sleep(0.2)  # the head is read and the handler waits on the body
        s.close()
        wait_until(lambda: _metric(hostile, "disconnected") > before, "the hang-up to be counted")
    finally:
        for logger in watched:
            logger.removeHandler(handler)
    text = stream.getvalue()
    assert "Traceback" not in text and "Exception in ASGI" not in text, text
    assert text.count("hung up") == 1, text


@pytest.mark.slow
def test_a_kept_alive_connection_trickling_its_next_head_is_closed(hostile: Running) -> None:
    """uvicorn's keep-alive timer restarts on every byte; the head deadline does not."""
    port = int(hostile.url.rsplit(":", 1)[1])
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        first = b""
        while b'"ok"' not in first:
            chunk = s.recv(4096)
            assert chunk, "closed before answering"
            first += chunk
        s.sendall(b"GET /healthz HTTP/1.1\r\n")
        s.settimeout(0.3)
        started = time.monotonic()
        closed = False
        while not closed and time.monotonic() - started < HEADER_TIMEOUT_S + 4:
            try:
                s.sendall(b"X")  # one byte of a header line every 0.3 s, never the blank line
                closed = s.recv(4096) == b""
            except TimeoutError:
                continue
            except (BrokenPipeError, ConnectionResetError):
                closed = True
    assert closed, "a trickled request head kept the connection open"
    assert time.monotonic() - started < HEADER_TIMEOUT_S + 4


def test_status_is_minimal_without_the_token_and_complete_with_it(hostile: Running) -> None:
    public: dict[str, Any] = hostile.http.get("/status").json()
    assert set(public) == {"environments", "ready", "role"}
    env = public["environments"]["studio-a"]
    assert env["ok"] is True and len(env["commit"]) == 12
    text = json.dumps(public)
    assert hostile.service.settings.state_dir not in text and hostile.remote.bare_path.name not in text
    wrong = hostile.http.get("/status", headers={"Authorization": "Bearer wrong"})
    assert set(wrong.json()) == {"environments", "ready", "role"}
    full: dict[str, Any] = hostile.http.get("/status", headers=AUTH).json()
    assert full["environments"]["studio-a"]["sync"]["ok"] is True
    assert {"workers", "last_sync", "reports", "tracked_refs"} <= set(full)


def test_phrame_replay_reads_the_token_from_a_file_or_stdin(
    hostile: Running, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from phrame.cli import main as phrame_main

    event = str(WEBHOOKS / "push.json")
    url = f"{hostile.url}/webhooks/gitlab"
    token_file = tmp_path / "token"
    token_file.write_text(SECRET + "\n")
    wrong_file = tmp_path / "wrong"
    wrong_file.write_text("wrong\n")
    assert phrame_main(["replay", event, "--url", url, "--new-key", "--token-file", str(token_file)]) == 0
    assert phrame_main(["replay", event, "--url", url, "--new-key", "--token-file", str(wrong_file)]) == 1
    monkeypatch.setattr("sys.stdin", io.StringIO(SECRET + "\n"))
    assert phrame_main(["replay", event, "--url", url, "--new-key", "--token", "-"]) == 0
    capsys.readouterr()
    assert phrame_main(["replay", event, "--url", url, "--new-key", "--token", SECRET]) == 0
    assert "visible to other users" in capsys.readouterr().err
    missing = str(tmp_path / "missing")
    assert phrame_main(["replay", event, "--url", url, "--token-file", missing]) == 2
    assert "missing" in capsys.readouterr().err
