"""Supervised host processes (``kind: process``): start, watch, restart with backoff, stop.

The executor starts and stops them; the reconcile pass calls :meth:`ProcessSupervisor.check` once
per pass. Each process runs in its own session with its log in
``PHRAME_STATE_DIR/processes/<id>/output.log`` and a ``meta.json`` holding pid and start
time, so a restarted agent re-adopts it instead of starting a duplicate. It never runs a
process whose record it cannot save (a full disk: reported, retried), and it must never
signal a pid whose start time does not match its record (the pid may have been reused).
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn

import psutil

from node_agent.container_config import resolve_env
from node_agent.errors import ProcessError, RecordError, SpecError
from node_agent.models import Clock, ObservedProcess, Spec
from node_agent.process_records import ProcessRecords
from node_agent.secret_files import DEFAULT_SECRETS_DIR
from node_agent.sops_secrets import NO_SOPS, SopsSecrets
from phrame.runtime import backoff
from phrame.settings.state import inherited_umask, private_dir

log = logging.getLogger(__name__)
INHERITED = ("PATH", "LANG", "LC_ALL", "TZ")
# Stable = up at two consecutive checks *and* for this long: checks can come milliseconds
# apart (a pass, then its report), which alone would prove nothing before a handover.
STABLE_AFTER_S = 2.0


@dataclass
class _Entry:
    spec: dict[str, Any]
    pid: int | None = None
    create_time: float | None = None
    started_at: float | None = None
    up_since: float = 0.0  # supervisor clock time of the start
    popen: subprocess.Popen[bytes] | None = field(default=None, repr=False)
    up_checks: int = 0
    failures: int = 0
    restart_count: int = 0
    exit_code: int | None = None
    retry_at: float = 0.0
    error: str | None = None
    unsaved: bool = False  # not running because its record cannot be saved (a full disk)


class ProcessSupervisor:
    def __init__(
        self,
        state_dir: Path,
        *,
        clock: Callable[[], float] = time.monotonic,
        base_backoff: float = 1.0,
        max_backoff: float = 60.0,
        stop_timeout: float = 10.0,
        stable_after_s: float = STABLE_AFTER_S,
        secrets_dir: Path = DEFAULT_SECRETS_DIR,
        wall_clock: Clock = time.time,
        sops: SopsSecrets = NO_SOPS,
    ) -> None:
        self.sops = sops  # decrypts ``env: {X: {secret: file/key}}`` (PHRAME_AGE_KEY_FILE)
        self.root = state_dir / "processes"
        self.records = ProcessRecords(self.root)
        self.secrets_dir = secrets_dir
        self.clock = clock  # monotonic: backoffs and how long a process is up
        self.wall_clock = wall_clock  # start times in the records, read by the next agent
        self.stable_after_s = stable_after_s
        self.base_backoff = base_backoff
        self.max_backoff = max_backoff
        self.stop_timeout = stop_timeout
        self._entries: dict[str, _Entry] = {}
        if self.root.is_dir():  # a dry run creates nothing; _spawn makes it private
            private_dir(self.root)  # process logs: 0700, tightened once if looser
        self._adopt()

    # -- records on disk
    def _dir(self, item_id: str) -> Path:
        return self.root / item_id

    @staticmethod
    def _meta(e: _Entry) -> dict[str, Any]:
        meta: dict[str, Any] = {"pid": e.pid, "create_time": e.create_time}
        return meta | {"started_at": e.started_at, "restart_count": e.restart_count, "spec": e.spec}

    def _adopt(self) -> None:
        """Re-attach to processes a previous agent started (matched by pid + start time)."""
        for item_id, meta in self.records.all():
            e = _Entry(spec=meta["spec"], restart_count=int(meta.get("restart_count") or 0))
            if _alive(meta.get("pid"), meta.get("create_time")):
                e.pid, e.create_time = meta["pid"], meta["create_time"]
                e.started_at = meta.get("started_at")
                up_for = self.wall_clock() - float(e.started_at or self.wall_clock())
                e.up_since = self.clock() - max(0.0, up_for)
                # the previous agent watched it: up long enough counts as its two checks, so a
                # restarted agent does not take a finished handover for a fresh one
                e.up_checks = 2 if up_for >= self.stable_after_s else 1
                log.info("re-adopted process %s (pid %s)", item_id, e.pid)
            self._entries[item_id] = e

    # -- the runtime used by the executor
    def start(self, spec: Spec) -> None:
        item_id = spec["name"]
        e = self._entries.get(item_id) or _Entry(spec=dict(spec))
        e.spec = dict(spec)
        self._entries[item_id] = e
        self._spawn(item_id, e)

    def _spawn(self, item_id: str, e: _Entry) -> None:
        env = {k: os.environ[k] for k in INHERITED if k in os.environ}
        try:
            directory = private_dir(self._dir(item_id))  # 0700, like processes/ above it
            # a process its record cannot hold would be a stranger to the next agent (which
            # would start a second one): none is started while the disk refuses the record
            self.records.probe(item_id, self._meta(e))
            env |= resolve_env(
                e.spec.get("env"), item_id, self.secrets_dir, sops=self.sops, encrypted=e.spec.get("secrets")
            )
            with open(directory / "output.log", "ab") as out:
                e.popen = subprocess.Popen(
                    e.spec["command"],
                    cwd=e.spec.get("workdir") or None,
                    env=env,
                    user=e.spec.get("user") or None,
                    stdin=subprocess.DEVNULL,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,  # survives the agent; signalled as a group
                    umask=inherited_umask(),  # the agent's private umask is not the process's
                )
        except RecordError as err:
            self._unsaved(item_id, e, err)
        except (KeyError, OSError, ValueError, SpecError, subprocess.SubprocessError) as err:
            # KeyError: Popen's look-up of an unknown user
            why = f"no user {e.spec.get('user')!r} on this host" if isinstance(err, KeyError) else err
            e.pid, e.error = None, f"cannot start {e.spec['command']!r}: {why}"
            e.retry_at = self.clock() + self._backoff(e)
            e.failures += 1
            raise ProcessError(f"{item_id}: {e.error}") from err
        e.pid = e.popen.pid
        e.create_time = psutil.Process(e.pid).create_time()
        e.started_at, e.up_checks, e.error, e.exit_code = self.wall_clock(), 0, None, None
        e.up_since = self.clock()
        try:
            self.records.save(item_id, self._meta(e))
        except RecordError as err:  # the disk filled since the probe: stop what has no record
            self._kill(e)
            self._unsaved(item_id, e, err)
        if e.unsaved:
            log.info("process %s: its record is saved again", item_id)
        e.unsaved = False
        log.info("started process %s (pid %s)", item_id, e.pid)

    def _unsaved(self, item_id: str, e: _Entry, err: RecordError) -> NoReturn:
        """Not running for want of disk: retried at the first backoff, never counted as a
        crash of the process (which would lengthen its backoff and its time to be stable)."""
        if not e.unsaved:
            log.error("process %s: %s", item_id, err)
        e.pid, e.error, e.unsaved = None, str(err), True
        e.retry_at = self.clock() + self.base_backoff
        raise RecordError(f"{item_id}: {err}") from err

    def _kill(self, e: _Entry) -> None:
        assert e.pid is not None and e.popen is not None
        with contextlib.suppress(ProcessLookupError):
            os.killpg(e.pid, signal.SIGKILL)  # a session leader: its whole group
        e.popen.wait(5)

    def stop(self, item_id: str) -> None:
        e = self._entries.pop(item_id, None)
        if e is not None and _alive(e.pid, e.create_time):
            assert e.pid is not None
            try:
                os.killpg(e.pid, signal.SIGTERM)
                psutil.Process(e.pid).wait(self.stop_timeout)
            except psutil.TimeoutExpired:
                os.killpg(e.pid, signal.SIGKILL)
            except (ProcessLookupError, psutil.NoSuchProcess):
                pass
            if e.popen is not None:
                e.popen.wait(5)
        self.records.forget(item_id)
        log.info("stopped process %s", item_id)

    # -- the per-pass check
    def check(self) -> dict[str, ObservedProcess]:
        """Count up checks, restart dead processes once their backoff elapsed."""
        now = self.clock()
        for item_id, e in self._entries.items():
            if e.popen is not None and e.popen.poll() is not None:
                e.exit_code = e.popen.returncode
            if _alive(e.pid, e.create_time):
                e.up_checks += 1
                if self._stable(e, now) and now - e.up_since >= max(self.max_backoff, 2 * self._needed(e)):
                    # crashes are forgiven only after a long run: forgiving them as soon as it
                    # counts stable again would let a process that dies every few seconds
                    # take over and give back its container forever
                    e.failures = 0
                continue
            if e.pid is not None:  # just found dead: schedule a restart
                log.warning("process %s (pid %s) exited with %s", item_id, e.pid, e.exit_code)
                e.pid, e.up_checks = None, 0
                e.retry_at = now + self._backoff(e)
                e.failures += 1
            elif now >= e.retry_at:
                e.restart_count += 1
                try:
                    self._spawn(item_id, e)
                except RecordError:
                    e.restart_count -= 1  # not started: no restart to count
                except ProcessError as err:
                    log.warning("%s", err)
        return {item_id: self._observed(item_id, e, now) for item_id, e in self._entries.items()}

    def record_errors(self) -> list[str]:
        """What is not running because its record cannot be saved (for the node status)."""
        return sorted(f"process {i}: {e.error}" for i, e in self._entries.items() if e.unsaved)

    def next_retry(self) -> float | None:
        """Clock time of the earliest pending restart, for the loop's next wake-up."""
        times = [e.retry_at for e in self._entries.values() if e.pid is None]
        return min(times) if times else None

    def _stable(self, e: _Entry, now: float) -> bool:
        """Up at two consecutive checks and for ``stable_after_s``, doubled for each crash
        since the last stable run: a process that dies after a few seconds stops counting
        as stable, so the container it replaces stays instead of coming and going."""
        return e.pid is not None and e.up_checks >= 2 and now - e.up_since >= self._needed(e)

    def _backoff(self, e: _Entry) -> float:
        """How long a process that just failed waits before its next start."""
        return backoff(e.failures + 1, base=self.base_backoff, cap=self.max_backoff)

    def _needed(self, e: _Entry) -> float:
        return backoff(e.failures + 1, base=self.stable_after_s, cap=self.stable_after_s * 2**6)

    def _observed(self, item_id: str, e: _Entry, now: float) -> ObservedProcess:
        running = e.pid is not None
        return ObservedProcess(
            item_id=item_id,
            pid=e.pid,
            state="running" if running else "backoff",
            digest=e.spec.get("digest"),
            started_at=e.started_at if running else None,
            restart_count=e.restart_count,
            exit_code=e.exit_code,
            is_stable=self._stable(e, now),
            error=e.error,
        )


def _alive(pid: int | None, create_time: float | None) -> bool:
    if not pid:
        return False
    try:
        p = psutil.Process(pid)
        same = create_time is None or abs(p.create_time() - create_time) < 0.01
        return same and bool(p.status() != psutil.STATUS_ZOMBIE)
    except psutil.Error:
        return False
