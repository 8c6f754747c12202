"""``phrame dev``: the whole loop on this machine, in the foreground (``make up``).

Starts and supervises a broker, config-sync on a local bare repository, placement and
node agents (:mod:`dev_stack`); ``--down`` stops a running stack of that state folder and
removes what its nodes created (``--purge``: the state folder too). Exit 0 after a clean
stop, 2 for a usage problem (a taken port, a stack already running, bad options).
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import sys
import time
from pathlib import Path

from dev_stack.settings import (
    DEFAULT_API_PORT,
    DEFAULT_BROKER_PORT,
    DEFAULT_LISTEN,
    DEFAULT_STANDBY_PORT,
    DEFAULT_STATE_DIR,
    DEFAULT_WEB_PORT,
    DevSettings,
)


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--state-dir", default=DEFAULT_STATE_DIR, help="state folder (default .phrame-dev)")
    parser.add_argument("--nodes", type=int, default=2, help="number of agents (default 2)")
    parser.add_argument("--node-prefix", default="dev", help="node names are PREFIX-1..N (default dev)")
    parser.add_argument("--environment", default="quickstart", help="the sample's environment name")
    parser.add_argument("--broker-port", type=int, default=DEFAULT_BROKER_PORT, help="default 1883")
    parser.add_argument(
        "--listen", default=DEFAULT_LISTEN, help="config-sync's host:port (default 127.0.0.1:8080)"
    )
    parser.add_argument(
        "--web-port", type=int, default=DEFAULT_WEB_PORT, help="the sample page's port (8081)"
    )
    parser.add_argument(
        "--api-port", type=int, default=DEFAULT_API_PORT, help="the topic API and dashboard's port (8090)"
    )
    parser.add_argument(
        "--broker",
        choices=("auto", "mosquitto"),
        default="auto",
        help="mosquitto (auto: the same); amqtt is not offered, it cannot check passwords and the ACL",
    )
    parser.add_argument(
        "--ha",
        action="store_true",
        help="run two config-syncs, active + standby behind a lease on the broker (the hook posts to both)",
    )
    parser.add_argument(
        "--standby-port",
        type=int,
        default=DEFAULT_STANDBY_PORT,
        help="with --ha: the standby config-sync's port (8082)",
    )
    parser.add_argument(
        "--down", action="store_true", help="stop the stack and remove its containers and networks"
    )
    parser.add_argument("--purge", action="store_true", help="with --down: remove the state folder too")


_console = {"open": True}


def say(line: str) -> None:
    """One console line; a console that went away (``make up | tee`` and Ctrl-C, a closed
    terminal) silences the rest, so stopping goes on instead of dying with the parts running."""
    if not _console["open"]:
        return
    try:
        print(f"phrame dev: {line}" if line and not line.startswith(" ") else line, flush=True)
    except OSError:  # EPIPE, EIO
        _console["open"] = False
        with contextlib.suppress(OSError):
            # stdout's buffer still holds the line: point fd 1 at /dev/null so flushing at exit
            # cannot fail again
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())


def run(args: argparse.Namespace) -> int:
    from dev_stack.errors import DevError
    from phrame.settings.state import use_private_umask

    # the console is for the supervisor's own lines; its MQTT client's reconnects are no news
    logging.basicConfig(level=logging.ERROR)
    use_private_umask()  # the state folder's files (and git's) are 0600/0700; children get the user's back

    try:
        if args.down:
            return _down(args)
        if args.purge:
            raise DevError("--purge goes with --down")
        settings = DevSettings(
            Path(args.state_dir),
            nodes=DevSettings.node_names(args.nodes, args.node_prefix),
            environment=args.environment,
            broker_port=args.broker_port,
            listen=args.listen,
            web_port=args.web_port,
            api_port=args.api_port,
            broker=args.broker,
            ha=args.ha,
            standby_port=args.standby_port,
        )
        saved = DevSettings.load(settings.state_dir)
        if saved is not None and saved.nodes != settings.nodes:
            raise DevError(
                f"{settings.state_dir} was made for nodes {', '.join(saved.nodes)}; "
                "use the same --nodes/--node-prefix or phrame dev --down --purge first"
            )
        from dev_stack.supervisor import DevStack

        stack = DevStack(settings, say=say)
        stack.handle_signals()
        say(f"starting in {settings.state_dir} at {time.strftime('%H:%M:%S')}")
        return stack.run()
    except DevError as e:
        print(f"phrame dev: {e}", file=sys.stderr)
        return 2


def _down(args: argparse.Namespace) -> int:
    from dev_stack.down import down

    state_dir = Path(args.state_dir).absolute()
    settings = DevSettings.load(state_dir)
    if settings is None:
        if not state_dir.exists():
            say(f"nothing to do: no dev stack state in {state_dir}")
            return 0
        settings = DevSettings(state_dir, nodes=DevSettings.node_names(args.nodes, args.node_prefix))
    return down(settings, purge=args.purge, say=say)
