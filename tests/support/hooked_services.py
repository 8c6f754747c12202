"""Test-only launchers of a service with a hook built in, for the fault suite's stand-ins.

``python -m tests.support.hooked_services config-sync --pause-file PATH`` runs
``phrame config-sync`` whose publisher pauses between a commit's items and its manifests
while PATH exists (:class:`FilePause`); ``... node-agent --clock-offset-s S`` runs
``phrame node-agent`` with its wall clock S seconds off (:class:`OffsetClock`). Everything
else (settings from ``PHRAME_*``) is the product's own command; the hooks reach the service
through its constructors. Never imported by product code.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

from phrame.cli import build_parser

POLL_S = 0.05


def command(service: str, *args: str) -> list[str]:
    """The command line of ``service`` with its hook (run from the repository's root)."""
    return [sys.executable, "-m", "tests.support.hooked_services", service, *args]


class FilePause:
    """While ``path`` exists: write ``<path>.reached`` (this pid) and wait until it is removed.

    The fault suite SIGKILLs the paused process there, or removes the file to let it go on.
    Without the file it returns at once.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self.reached = Path(f"{path}.reached")

    def __call__(self) -> None:
        if not self.path.exists():
            return
        # whole or not at all: a reader that sees the file sees the pid (write, then rename)
        partial = self.reached.with_name(self.reached.name + ".part")
        partial.write_text(str(os.getpid()))
        os.replace(partial, self.reached)
        while self.path.exists():  # the process waiting here is the subject, not a test
            time.sleep(POLL_S)


class OffsetClock:
    """``time.time()`` shifted by ``offset_s`` (negative: behind), for a node whose clock is off.

    libfaketime 0.9.10 breaks Python's ``time.sleep``, so the skew is handed in instead."""

    def __init__(self, offset_s: float) -> None:
        self.offset_s = offset_s

    def __call__(self) -> float:
        return time.time() + self.offset_s


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="hooked_services")
    subs = parser.add_subparsers(dest="service", required=True)
    sync = subs.add_parser("config-sync")
    sync.add_argument("--pause-file", type=Path, required=True)
    agent = subs.add_parser("node-agent")
    agent.add_argument("--clock-offset-s", type=float, required=True)
    args = parser.parse_args(argv)
    # the product command's own arguments, as `phrame <service>` with none given
    plain = build_parser(args.service).parse_args([args.service])
    if args.service == "config-sync":
        from phrame.cli import cmd_config_sync

        return cmd_config_sync.run(plain, before_manifests=FilePause(args.pause_file))
    from phrame.cli import cmd_node_agent

    return cmd_node_agent.run(plain, wall_clock=OffsetClock(args.clock_offset_s))


if __name__ == "__main__":
    sys.exit(main())
