"""The topic API as real processes for tests and ``benchmarks/sse_latency.py``.

:class:`ApiStack` runs ``phrame mirror --plane desired``, ``--plane actual`` and
``phrame topic-api`` (real uvicorn) against a test broker, on a free 127.0.0.1 port with
their own snapshot folder; :class:`SseReader` reads ``/api/events`` on a thread so tests
wait on events with a bound. :func:`fleet` builds realistic retained payloads, each valid
under its schema. Everything is stopped by pid.
"""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import httpx

from schemas import Topics, check_payload, digest
from tests.support.services import free_port, stop_process, wait_for_port
from tests.support.waiting import wait_for

ROOT = Path(__file__).parents[2]


class ApiStack:
    def __init__(
        self, broker_url: str, folder: Path, *, token: str | None = "test-token", **env: str
    ) -> None:
        self.folder = folder
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.token = token
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("PHRAME_")}
        self.env |= {
            "PHRAME_DESIRED_MQTT_URL": broker_url,
            "PHRAME_MIRROR_DIR": str(folder / "mirror"),
            "PHRAME_STATE_DIR": str(folder / "state"),
            "PHRAME_MIRROR_DEBOUNCE_MS": "50",
            "PHRAME_MIRROR_MAX_DELAY_MS": "500",
            "PHRAME_LISTEN": f"127.0.0.1:{self.port}",
            "PHRAME_MQTT_RECONNECT_MAX_S": "1",
        }
        if token is not None:
            self.env["PHRAME_API_TOKEN"] = token
        self.env |= env
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        folder.mkdir(parents=True, exist_ok=True)

    def _spawn(self, name: str, *args: str) -> None:
        log = open(self.folder / f"{name}.log", "ab")  # noqa: SIM115 -- the child holds it
        cmd = [sys.executable, "-m", "phrame", *args]
        self.procs[name] = subprocess.Popen(cmd, env=self.env, stdout=log, stderr=log, cwd=ROOT)
        log.close()

    def start(self, *, mirrors: bool = True) -> ApiStack:
        if mirrors:
            self._spawn("mirror-desired", "mirror", "--plane", "desired")
            self._spawn("mirror-actual", "mirror", "--plane", "actual")
        self._spawn("api", "topic-api")
        if not wait_for_port(self.port, 20):
            self.stop()
            raise AssertionError(f"topic-api did not listen on {self.port}:\n{self.logs()}")
        return self

    def stop(self) -> None:
        for proc in self.procs.values():
            stop_process(proc)

    def logs(self) -> str:
        return "\n".join(f"--- {p.name}\n{p.read_text()[-3000:]}" for p in sorted(self.folder.glob("*.log")))

    def headers(self, token: str | None = "default") -> dict[str, str]:
        token = self.token if token == "default" else token
        return {"Authorization": f"Bearer {token}"} if token else {}

    def get(self, path: str, **kw: Any) -> httpx.Response:
        return httpx.get(self.url + path, timeout=10, **kw)

    def post(self, path: str, *, token: str | None = "default", **kw: Any) -> httpx.Response:
        return httpx.post(self.url + path, headers=self.headers(token), timeout=60, **kw)

    def json(self, path: str) -> Any:
        r = self.get(path, headers=self.headers())
        assert r.status_code == 200, (path, r.status_code, r.text)
        return r.json()

    def wait_json(self, path: str, predicate: Any, what: str, timeout: float = 15.0) -> Any:
        last: list[Any] = [None]

        def check() -> Any:
            r = self.get(path, headers=self.headers())
            last[0] = r.json() if r.status_code == 200 else (r.status_code, r.text)
            return last[0] if r.status_code == 200 and predicate(last[0]) else None

        return wait_for(check, what, timeout, interval=0.05, observe=lambda: str(last[0])[:2000])


class SseReader:
    """Events of ``url`` as (event, data) on a queue, read by a thread until :meth:`close`."""

    def __init__(self, url: str, headers: dict[str, str] | None = None) -> None:
        self.events: queue.Queue[tuple[str, Any, float]] = queue.Queue()
        self.status: int | None = None
        self._client = httpx.Client(timeout=httpx.Timeout(10, read=None))
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(url, headers or {}), daemon=True)
        self._thread.start()
        if not self._ready.wait(10):
            raise AssertionError(f"no answer from {url}")

    def _run(self, url: str, headers: dict[str, str]) -> None:
        try:
            with self._client.stream("GET", url, headers=headers) as r:
                self.status = r.status_code
                self._ready.set()
                event, data = "message", ""
                for line in r.iter_lines():
                    if line.startswith("event: "):
                        event = line[7:]
                    elif line.startswith("data: "):
                        data = line[6:]
                    elif line.startswith(":"):
                        self.events.put(("comment", line, time.monotonic()))
                    elif not line and data:
                        self.events.put((event, json.loads(data), time.monotonic()))
                        event, data = "message", ""
                self.events.put(("end", None, time.monotonic()))
        except httpx.HTTPError:
            self.events.put(("end", None, time.monotonic()))
        finally:
            self._ready.set()

    def next(self, event: str, timeout: float = 10.0, predicate: Any = None) -> tuple[Any, float]:
        """The next ``event`` (whose data satisfies ``predicate``) and when it arrived."""
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"no {event!r} event within {timeout} s")
            try:
                name, data, at = self.events.get(timeout=left)
            except queue.Empty:
                continue
            if name == "end" and event != "end":
                raise AssertionError(f"the stream ended while waiting for {event!r}")
            if name == event and (predicate is None or predicate(data)):
                return data, at

    def close(self) -> None:
        self._client.close()


def fleet(
    nodes: list[str], items: int, *, env: str = "demo", commit: str = "c" * 40, now: float | None = None
) -> dict[str, bytes]:
    """Retained messages of a converged fleet: per node ``items`` containers desired and
    running, its manifest, status and heartbeat; each payload valid under its schema."""
    t, now = Topics(), time.time() if now is None else now
    out: dict[str, Any] = {}
    for node in nodes:
        listed = {}
        for i in range(items):
            item_id = f"{env}.svc{i}.0"
            spec: dict[str, Any] = {
                "kind": "container",
                "name": item_id,
                "environment": env,
                "service": f"svc{i}",
                "replica": 0,
                "image": "img:1",
                "command": None,
                "env": {},
                "ports": [],
                "volumes": [],
                "networks": [],
                "restart": "no",
                "depends_on": [],
                "labels": {},
            }
            spec["digest"] = digest(spec)
            spec["commit"] = commit
            out[t.desired_item(node, "containers", item_id)] = spec
            listed[f"containers/{item_id}"] = spec["digest"]
            out[t.actual_item(node, "containers", item_id)] = {
                "state": "running",
                "health": None,
                "image": "img:1",
                "digest": spec["digest"],
                "ts": now,
            }
        out[t.manifest(node)] = {"generation": 1, "commit": commit, "items": listed}
        out[t.status(node)] = {
            "state": "online",
            "agent": "test",
            "generation": 1,
            "commit": commit,
            "converged": True,
            "errors": [],
            "ts": now,
        }
        out[t.heartbeat(node)] = heartbeat(now)
    for topic, payload in out.items():
        check_payload(t.parse(topic).schema_name, payload)
    return {topic: json.dumps(payload).encode() for topic, payload in out.items()}


def heartbeat(ts: float, seq: int = 1, cpu: float = 3.5) -> dict[str, Any]:
    host = {
        "cpu_percent": cpu,
        "load1": 0.2,
        "mem_total": 8e9,
        "mem_used": 2e9,
        "disk_total": 1e11,
        "disk_used": 3e10,
    }
    return {"ts": ts, "seq": seq, "interval_s": 5, "host": host, "counts": {"containers": 1}}
