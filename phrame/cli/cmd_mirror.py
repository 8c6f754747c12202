"""``phrame mirror --plane desired|actual``: keep ``<PHRAME_MIRROR_DIR>/<plane>.json`` current.

Runs :class:`mirror.loop.MirrorLoop` until SIGTERM/SIGINT (a last snapshot is written on the
way out). Exit 2: bad settings.
"""

from __future__ import annotations

import argparse
import signal
import sys

from mirror.loop import MirrorLoop
from mirror.metrics import mirror_registry
from mirror.settings import PLANES, MirrorSettings
from phrame.mqtt import MqttError
from phrame.settings import setup_logging, use_private_umask
from phrame.settings.metrics_listen import start_listener


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--plane", required=True, choices=PLANES, help="the plane to mirror")


def run(args: argparse.Namespace) -> int:
    setup_logging()
    use_private_umask()  # snapshots 0600 under a 0700 folder, as every service's state
    try:
        loop = MirrorLoop(MirrorSettings.from_env(args.plane))
        start_listener(mirror_registry(loop), loop.settings.metrics_listen)
    except MqttError as e:
        print(f"phrame mirror: {e}", file=sys.stderr)
        return 2
    except OSError as e:  # the metrics port is taken or not ours: a configuration error
        print(f"phrame mirror: cannot listen for metrics: {e}", file=sys.stderr)
        return 2
    signal.signal(signal.SIGTERM, lambda *_: loop.stop())
    signal.signal(signal.SIGINT, lambda *_: loop.stop())
    try:
        return loop.run()
    except MqttError as e:
        print(f"phrame mirror: {e}", file=sys.stderr)
        return 1
