"""``phrame placement [--once]``: the placement reconciler.

Without ``--once`` it runs the loop until SIGTERM/SIGINT: liveness from the actual plane,
a pass every ``PHRAME_PLACEMENT_INTERVAL_S``, ``node.json`` committed when the decision
changed, state published on ``<prefix>/desired/environments/<env>/placement``. With
``--once`` it reads the retained liveness, does one pass, prints each environment's state
as JSON and exits 0 (1 when an environment failed). Exit 2: bad settings.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys

from phrame.mqtt import MqttError
from phrame.settings import setup_logging
from phrame.settings.metrics_listen import start_listener
from phrame.settings.state import use_private_umask
from placement.errors import PlacementError
from placement.loop import build_loop
from placement.settings import PlacementSettings


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--once", action="store_true", help="one pass: print each environment's state")


def run(args: argparse.Namespace) -> int:
    setup_logging()
    use_private_umask()  # the clone cache under PHRAME_STATE_DIR: 0600/0700 (git's files too)
    try:
        settings = PlacementSettings.from_env()
        loop = build_loop(settings)
    except (PlacementError, MqttError) as e:
        print(f"phrame placement: {e}", file=sys.stderr)
        return 2
    if not args.once:
        try:
            start_listener(loop.metrics.registry, settings.metrics_listen)
        except OSError as e:  # the port is taken or the address is not ours: a configuration error
            print(
                f"phrame placement: cannot listen on {settings.metrics_listen} for metrics: {e}",
                file=sys.stderr,
            )
            return 2
        signal.signal(signal.SIGTERM, lambda *_: loop.stop())
        signal.signal(signal.SIGINT, lambda *_: loop.stop())
        return loop.run()
    try:
        loop.connect()
        if loop.lock is not None and not loop.lock.try_acquire():
            print(f"phrame placement: another instance holds {loop.lock.path}", file=sys.stderr)
            return 1
        loop.confirm_stale()  # a node whose retained heartbeat is dated past the timeout
        results = loop.run_pass()
    except MqttError as e:
        print(f"phrame placement: {e}", file=sys.stderr)
        return 1
    finally:
        loop.close()
    print(json.dumps([loop.state_of(r) for r in results], indent=2, sort_keys=True))
    return 1 if any(r.error for r in results) else 0
