"""``phrame image-watch [--once]``: propose image updates allowed by the environments'
``images:`` policies as branches (merge requests with GitLab).

Without ``--once`` it runs a pass every ``PHRAME_IMAGE_WATCH_INTERVAL_S`` until
SIGTERM/SIGINT. With ``--once`` it runs one pass, prints each policy's outcome as JSON and
exits 0 (1 when a service failed). Exit 2: bad settings.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys

from image_watch.build import build_watcher
from image_watch.settings import WatchSettings, WatchSettingsError
from phrame.git import GitError
from phrame.runtime import BackgroundLoop
from phrame.settings import EnvReader, setup_logging
from phrame.settings.state import use_private_umask


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--once", action="store_true", help="one pass: print each policy's outcome")


def run(args: argparse.Namespace) -> int:
    setup_logging()
    use_private_umask()  # the clone cache under PHRAME_STATE_DIR
    try:
        settings = WatchSettings.from_env(EnvReader(error=WatchSettingsError))
        watcher = build_watcher(settings)
    except WatchSettingsError as e:
        print(f"phrame image-watch: {e}", file=sys.stderr)
        return 2
    if args.once:
        try:
            outcomes = watcher.run_once()
        except GitError as e:
            print(f"phrame image-watch: {e}", file=sys.stderr)
            return 1
        doc = [
            {"environment": o.env, "service": o.service, "state": o.state, "detail": o.detail}
            for o in outcomes
        ]
        print(json.dumps(doc, indent=2))
        return 1 if any(o.state == "failed" for o in outcomes) else 0
    loop = BackgroundLoop(
        "image-watch", lambda: watcher.tick(settings.interval_s), error_wait_s=settings.interval_s
    )
    signal.signal(signal.SIGTERM, lambda *_: loop.stop())
    signal.signal(signal.SIGINT, lambda *_: loop.stop())
    loop.run()
    return 0
