"""Benchmark: the config-sync webhook endpoint under 1,000 deliveries, 20 concurrent
(run by ``make bench``; prints one JSON object).

config-sync runs as its own process (``python -m config_sync``, uvicorn on 127.0.0.1)
against a real mosquitto and a bare git repo of the sample config; the load comes from
20 keep-alive asyncio connections here. Target: p99 answer under 50 ms, and
the burst coalesces into a bounded number of syncs. Reports, never gates: exit 0 when
it ran, 2 without mosquitto.
Baseline: none measured (the target is an absolute latency budget).
"""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "benchmarks")]

from figures import percentile  # noqa: E402

REQUESTS, CONCURRENCY, WARMUP = 1000, 20, 50
TARGET_P99_MS = 50.0
SECRET = "phrame-bench-secret"


# what report.py puts in the table (benchmarks/figures.py says how to read it)
FIGURES = [
    {
        "name": "webhook answer p99, 1,000 requests, 20 concurrent",
        "value": "p99_ms",
        "unit": "ms",
        "baseline": None,
        "target": "target_p99_ms",
    },
    {"name": "syncs caused by the burst", "value": "syncs_caused", "unit": "", "baseline": None, "target": 2},
]


async def _connection(
    port: int,
    path: str,
    body: bytes,
    headers: dict[str, str],
    count: int,
    out: list[float],
    codes: dict[int, int],
) -> None:
    """One keep-alive connection sending ``count`` deliveries back to back (a thin client:
    httpx's own overhead would be measured otherwise, on the same two cores)."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    fixed = "".join(f"{k}: {v}\r\n" for k, v in headers.items() if k.lower() != "idempotency-key")
    try:
        for _ in range(count):
            head = (
                f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n{fixed}"
                f"Idempotency-Key: {uuid.uuid4()}\r\nContent-Length: {len(body)}\r\n\r\n"
            )
            start = time.perf_counter()
            writer.write(head.encode() + body)
            status_line = await reader.readline()
            length = 0
            while (line := await reader.readline()) not in (b"\r\n", b""):
                name, _, value = line.decode().partition(":")
                if name.lower() == "content-length":
                    length = int(value)
            await reader.readexactly(length)
            out.append(time.perf_counter() - start)
            code = int(status_line.split()[1])
            codes[code] = codes.get(code, 0) + 1
    finally:
        writer.close()
        await writer.wait_closed()


async def load(
    port: int, path: str, body: bytes, headers: dict[str, str], count: int
) -> tuple[list[float], dict[int, int]]:
    latencies: list[float] = []
    codes: dict[int, int] = {}
    per = [count // CONCURRENCY + (1 if i < count % CONCURRENCY else 0) for i in range(CONCURRENCY)]
    await asyncio.gather(*(_connection(port, path, body, headers, n, latencies, codes) for n in per if n))
    return latencies, codes


def wait_ready(base: str, proc: subprocess.Popen[bytes], timeout: float = 60.0) -> None:
    import httpx

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"config-sync exited with {proc.returncode}")
        try:
            if httpx.get(f"{base}/readyz", timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    raise RuntimeError("config-sync did not become ready")


def main() -> int:
    import httpx

    from tests.support.mosquitto import Mosquitto
    from tests.support.services import free_port
    from tests.support.sync_support import SAMPLE, WEBHOOKS, ConfigRemote

    try:
        broker = Mosquitto().start()
    except Exception as e:
        print(json.dumps({"benchmark": "webhook_latency", "error": f"no mosquitto: {e}"}))
        return 2
    proc: subprocess.Popen[bytes] | None = None
    try:
        with tempfile.TemporaryDirectory(prefix="phrame-bench-hook-") as tmp:
            remote = ConfigRemote(Path(tmp))
            remote.commit("sample", copy_from=SAMPLE)
            port = free_port()
            env = {
                **os.environ,
                "PYTHONPATH": str(ROOT),
                "PHRAME_REPO_URL": str(remote.bare_path),
                "PHRAME_STATE_DIR": str(Path(tmp, "state")),
                "PHRAME_DESIRED_MQTT_URL": broker.url,
                "PHRAME_LISTEN": f"127.0.0.1:{port}",
                "PHRAME_WEBHOOK_SECRET": SECRET,
                "PHRAME_POLL_S": "3600",
            }
            proc = subprocess.Popen(
                [sys.executable, "-m", "config_sync"],
                cwd=ROOT,
                env=env,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            base = f"http://127.0.0.1:{port}"
            wait_ready(base, proc)
            doc = json.loads((WEBHOOKS / os.environ.get("BENCH_EVENT", "push.json")).read_text())
            headers = {**doc["headers"], "X-Gitlab-Token": SECRET}
            body = json.dumps(doc["body"]).encode()
            path = "/webhooks/gitlab"
            asyncio.run(load(port, path, body, headers, WARMUP))
            time.sleep(1.0)  # let the warm-up's sync finish
            auth = {"Authorization": f"Bearer {SECRET}"}  # the full /status needs the token
            runs_before = httpx.get(f"{base}/status", headers=auth).json()["workers"]["ref:main"]["runs"]
            started = time.perf_counter()
            latencies, codes = asyncio.run(load(port, path, body, headers, REQUESTS))
            wall = time.perf_counter() - started
            time.sleep(1.5)  # debounce + the sync it triggers
            status = httpx.get(f"{base}/status", headers=auth).json()
            syncs = status["workers"]["ref:main"]["runs"] - runs_before
            healthy = httpx.get(f"{base}/healthz").status_code == 200
    finally:
        if proc is not None:
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(5)
        broker.stop()
    ms = [x * 1000 for x in latencies]
    p99 = percentile(ms, 0.99)
    report = {
        "benchmark": "webhook_latency",
        "requests": REQUESTS,
        "concurrency": CONCURRENCY,
        "status_codes": {str(k): v for k, v in sorted(codes.items())},
        "p50_ms": round(percentile(ms, 0.5), 2),
        "p90_ms": round(percentile(ms, 0.9), 2),
        "p99_ms": round(p99, 2),
        "max_ms": round(max(ms), 2),
        "mean_ms": round(statistics.fmean(ms), 2),
        "requests_per_s": round(REQUESTS / wall, 1),
        "syncs_caused": syncs,
        "healthy_after": healthy,
        "target_p99_ms": TARGET_P99_MS,
        "meets_targets": p99 <= TARGET_P99_MS and codes == {202: REQUESTS} and syncs <= 2 and healthy,
        "note": "closed loop: 20 keep-alive connections on 127.0.0.1, the client on the same 2 cores",
    }
    print(json.dumps(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
