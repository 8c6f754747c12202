"""``phrame``: one sub-command per task and per service.

Each sub-command lives in its own module exposing ``configure(parser)`` and
``run(args) -> int``; this file only lists them, so a service adds itself with one line.
Exit codes: 0 success, 1 the task found a problem (e.g. invalid config), 2 usage error.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys

# sub-command name -> (module, one-line help)
COMMANDS: dict[str, tuple[str, str]] = {
    "validate": (
        "phrame.cli.cmd_validate",
        "validate a config repo; print file:line:col: rule: message",
    ),
    "render": ("phrame.cli.cmd_render", "print each node's desired state as config-sync publishes it"),
    "node-agent": (
        "phrame.cli.cmd_node_agent",
        "converge this host's Docker and processes (--once: one pass)",
    ),
    "broker-config": ("phrame.cli.cmd_broker_config", "write mosquitto.conf and the ACL for an inventory"),
    "config-sync": (
        "phrame.cli.cmd_config_sync",
        "run config-sync: GitLab webhooks to retained desired topics",
    ),
    "plan": ("phrame.cli.cmd_plan", "print per node what a change adds, changes and removes (the MR plan)"),
    "replay": ("phrame.cli.cmd_replay", "post a recorded GitLab webhook delivery to a running config-sync"),
    "promote": ("phrame.cli.cmd_promote", "release a staged rollout past its canary wave (config-sync)"),
    "approve": ("phrame.cli.cmd_approve", "approve a commit held for a protected environment (config-sync)"),
    "rollback": (
        "phrame.cli.cmd_rollback",
        "roll an environment back with a revert commit (config-sync; a merge request with GitLab)",
    ),
    "token": (
        "phrame.cli.cmd_token",
        "make a token for the tokens file (new), or hash one from stdin (hash)",
    ),
    "image-watch": (
        "phrame.cli.cmd_image_watch",
        "propose image updates allowed by the images: policies as branches or merge requests",
    ),
    "placement": ("phrame.cli.cmd_placement", "choose nodes for label-placed services, commit node.json"),
    "status": ("phrame.cli.cmd_status", "show nodes and environments as the broker reports them"),
    "mirror": ("phrame.cli.cmd_mirror", "write one plane's retained topics as a JSON snapshot file"),
    "topic-api": (
        "phrame.cli.cmd_topic_api",
        "serve the topic API and dashboard over the mirrors' snapshots",
    ),
    "import-compose": (
        "phrame.cli.cmd_import_compose",
        "write a compose file's services as config files, then validate",
    ),
    "export-compose": (
        "phrame.cli.cmd_export_compose",
        "print a node's desired state as a docker-compose.yml",
    ),
    "secrets": (
        "phrame.cli.cmd_secrets",
        "encrypt, edit or rotate an environment's SOPS secrets file for its nodes' age keys",
    ),
    "dev": ("phrame.cli.cmd_dev", "run the whole loop on this machine (make up); --down removes it"),
}


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The parser; only ``command``'s module is imported (all when None, none when "").

    Importing one sub-command at a time keeps each service's dependencies its own: the
    node agent runs on a host without git, which GitPython refuses to import without.
    """
    parser = argparse.ArgumentParser(prog="phrame", description="Phrame GitOps")
    subs = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, (module, help_text) in COMMANDS.items():
        sub = subs.add_parser(name, help=help_text, description=help_text)
        sub.set_defaults(_module=module)
        if command is None or name == command:
            importlib.import_module(module).configure(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    try:
        code = _main(argv)
        sys.stdout.flush()  # here, where a closed pipe can still be caught, not at exit
    except BrokenPipeError:
        # the reader went away (``phrame status --json | head -c 100``): end quietly, as
        # Python's documentation of SIGPIPE recommends; point stdout at /dev/null so the
        # interpreter's own flush at exit cannot fail again
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 1
    return code


def _main(argv: list[str] | None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    chosen = next((a for a in argv if not a.startswith("-")), "")
    parser = build_parser(chosen if chosen in COMMANDS else "")
    args = parser.parse_args(argv)
    if not getattr(args, "_module", None):
        parser.print_help(sys.stderr)
        return 2
    code: int = importlib.import_module(args._module).run(args)
    return code
