"""The host's load, memory and disk for the heartbeat: the only psutil use of the reporting.

:meth:`node_agent.reporting.ActualReporter.heartbeat` calls :func:`host_stats`; the agent's
process supervision has its own adapter (``processes.py``). Reads only; never acts.
"""

from __future__ import annotations

import os
from pathlib import Path

import psutil


def host_stats(disk_path: Path) -> dict[str, float]:
    """CPU, load, memory and the disk holding ``disk_path`` (``/`` until it exists)."""
    mem = psutil.virtual_memory()
    disk = psutil.disk_usage(str(disk_path if disk_path.exists() else Path("/")))
    return {
        "cpu_percent": psutil.cpu_percent(interval=None),
        "load1": os.getloadavg()[0],
        "mem_total": mem.total,
        "mem_used": mem.total - mem.available,
        "disk_total": disk.total,
        "disk_used": disk.used,
    }
