"""``phrame promote ENV SERVICE [--commit SHA] [--url URL]``: release a staged rollout past its canary wave.

Posts ``/rollouts/<env>/<service>/promote`` with ``{"commit": SHA}`` to a running
config-sync; without ``--commit``, the commit is read from config-sync's ``/status`` (the
rollout's, printed). Without ``--url`` or ``PHRAME_LISTEN`` it goes to a dev stack's
config-sync (its ``stack.json``). The bearer token: ``--token-file FILE``, ``--token -`` for
stdin, else ``PHRAME_TOKEN`` or ``_FILE`` (a ``deploy`` token of the tokens file), else
``PHRAME_WEBHOOK_SECRET`` or ``_FILE`` (honoured only where config-sync has no tokens file),
else a dev stack's own secret when the URL is its config-sync. Prints config-sync's answer
(and, on a 401, where the token comes from); exits 0 when the promotion is queued, 1 when
config-sync refused it (no rollout waiting at that commit, wrong token or scope), 2 for
usage or an unreachable config-sync. Never changes git.
"""

from __future__ import annotations

import argparse
import json
import sys
import urllib.request

from phrame.cli.deploy_call import add_target_arguments, call, names_ok, target


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("environment", help="the environment, e.g. studio-a")
    parser.add_argument("service", help="the service whose rollout waits for a promotion")
    parser.add_argument(
        "--commit",
        metavar="SHA",
        help="the commit whose canary to promote (7+ hex digits); default: the one config-sync says waits",
    )
    add_target_arguments(parser)


def _waiting_commit(base: str, env: str, service: str, headers: dict[str, str]) -> str | None:
    """The commit of ``env/service``'s rollout as config-sync's full ``/status`` shows it."""
    request = urllib.request.Request(f"{base}/status", headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            doc = json.loads(answer.read())
    except (OSError, ValueError):
        return None
    rollout = (doc.get("rollouts") or {}).get(f"{env}/{service}") if isinstance(doc, dict) else None
    commit = rollout.get("commit") if isinstance(rollout, dict) else None
    return commit if isinstance(commit, str) else None


def run(args: argparse.Namespace) -> int:
    if not names_ok("phrame promote", environment=args.environment, service=args.service):
        return 2
    found = target("phrame promote", args)
    if found is None:
        return 2
    base, token = found
    commit = args.commit
    if commit is None and token:
        commit = _waiting_commit(base, args.environment, args.service, {"Authorization": f"Bearer {token}"})
        if commit is not None:
            print(
                f"phrame promote: {args.environment}/{args.service} rolls out {commit[:12]}", file=sys.stderr
            )
    path = f"/rollouts/{args.environment}/{args.service}/promote"
    return call("phrame promote", base, token, path, {"commit": commit} if commit else None)
