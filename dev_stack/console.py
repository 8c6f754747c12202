"""What the supervisor prints while the stack runs: statuses, placements, errors.

The local git host has no GitLab to show ``phrame/validate`` and ``phrame/deploy``, so the
supervisor follows config-sync's and placement's logs (:class:`LogFollower`) and turns
their status and commit lines into one console line each (:func:`event_line`); for an
invalid commit it fetches every error from config-sync's ``/status``. It never changes state.
"""

from __future__ import annotations

import json
import re
import subprocess
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

STATUS = re.compile(r"status (phrame/\w+) of ([0-9a-f]+): (\w+) \((.*)\)$")
PLACED = re.compile(r"environment (\S+): committed ([0-9a-f]+) onto (\S+): (.*)$")
SUPERSEDED = re.compile(r"^superseded by ([0-9a-f]+)$")


class LogFollower:
    """New complete lines of a log file since the last call (starting at its current end)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.offset = path.stat().st_size if path.exists() else 0
        self.partial = b""

    def lines(self) -> list[str]:
        try:
            with open(self.path, "rb") as f:
                if f.seek(0, 2) < self.offset:  # truncated or replaced: start again
                    self.offset = 0
                f.seek(self.offset)
                data = f.read()
        except OSError:
            return []
        self.offset += len(data)
        data, self.partial = (
            (self.partial + data).rsplit(b"\n", 1) if b"\n" in data else (b"", self.partial + data)
        )
        return data.decode(errors="replace").splitlines() if data else []


def event_line(line: str, describe: Callable[[str], str | None] | None = None) -> str | None:
    """The console line for one log line of config-sync or placement, or None.
    ``describe``: a commit's subject by its (short) sha, to say what superseded a deployment."""
    m = STATUS.search(line)
    if m:
        name, sha, state, description = m.groups()
        newer = SUPERSEDED.match(description)
        if state == "canceled" and newer:
            subject = describe(newer.group(1)) if describe else None
            what = f"{newer.group(1)} ({subject})" if subject else newer.group(1)
            return (
                f"{name} {sha[:12]}: canceled: {what} came next before this one had converged; "
                "its own phrame/deploy line says what runs"
            )
        return f"{name} {sha[:12]}: {state} ({description})"
    m = PLACED.search(line)
    if m:
        env, sha, track, message = m.groups()
        return f"placement {sha[:12]} on {track} ({env}): {message}"
    return None


def sync_errors(status_url: str, token: str) -> list[str]:
    """``file:line:col: rule: message`` of each error of the last sync, from ``/status``
    (its full view, behind the webhook secret as a bearer token)."""
    request = urllib.request.Request(status_url, headers={"Authorization": f"Bearer {token}"})
    try:
        with urllib.request.urlopen(request, timeout=2) as response:
            doc: dict[str, Any] = json.loads(response.read())
    except (OSError, ValueError):
        return []
    out: list[str] = []
    for last in (doc.get("last_sync") or {}).values():
        for e in last.get("errors") or ():
            where = ":".join(str(e[k]) for k in ("file", "line", "column") if e.get(k) is not None)
            out.append(f"{where}: {e.get('rule', '?')}: {e.get('message', '')}")
    return out


def commit_subject(repo: Path, sha: str) -> str | None:
    """The subject line of ``sha`` in the git repository ``repo``, or None."""
    try:
        done = subprocess.run(
            ["git", "--git-dir", str(repo), "log", "-1", "--format=%s", sha, "--"],
            capture_output=True,
            text=True,
            timeout=5,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    if done.returncode != 0:
        return None
    return done.stdout.strip() or None
