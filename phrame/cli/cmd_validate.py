"""``phrame validate [PATH] [--ref REF] [--format text|json] [--policy-from-broker [URL]]``.

Prints every problem as ``file:line:col: rule: message``; exits 0 valid, 1 invalid,
2 usage (including a path or ref that cannot be read, or a broker that cannot be). With
``--policy-from-broker`` a valid repository's rendering is also checked against the policy
each node's agent reports in its retained status (MQTT settings as every service:
``PHRAME_*``, the actual plane's broker; URL overrides its address).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys

from phrame.cli.repo_args import add_repo_args, validated_from_args
from phrame.config_repo.model import ConfigRepo
from phrame.config_repo.node_policies import policies_from_statuses, policy_problems
from phrame.config_repo.problems import Problem
from phrame.config_repo.render import render
from phrame.settings import EnvReader
from schemas import Topics

BROKER_TIMEOUT_S = 10.0


def configure(parser: argparse.ArgumentParser) -> None:
    add_repo_args(parser)
    parser.add_argument("--format", choices=("text", "json"), default="text")
    parser.add_argument(
        "--policy-from-broker",
        nargs="?",
        const="",
        metavar="URL",
        help="also check each node's items against the node policy its agent reports (the actual "
        "plane's broker from PHRAME_* settings, or URL)",
    )


def run(args: argparse.Namespace) -> int:
    loaded = validated_from_args(args)
    if loaded is None:
        return 2
    repo, problems = loaded
    if args.policy_from_broker is not None:
        found = _policy_problems(repo, problems, args.policy_from_broker)
        if found is None:
            return 2
        problems = [*problems, *found]
    if args.format == "json":
        doc = {
            "valid": not problems,
            "commit": repo.commit,
            "problems": [p.to_dict() for p in problems],
        }
        print(json.dumps(doc, indent=2, ensure_ascii=False))
    else:
        for p in problems:
            print(p.format())
        services = sum(len(e.services) for e in repo.environments.values())
        where = f" at {repo.commit[:12]}" if repo.commit else ""
        verdict = f"{len(problems)} problem(s)" if problems else "valid"
        summary = f"{args.path}{where}: {verdict}; {len(repo.nodes)} nodes, "
        summary += f"{len(repo.environments)} environments, {services} services"
        print(summary, file=sys.stderr)
    return 1 if problems else 0


def _policy_problems(repo: ConfigRepo, problems: list[Problem], url: str) -> list[Problem] | None:
    """The node-policy problems of a valid repository (None: the broker cannot be read)."""
    from phrame.mqtt import MqttClient, MqttError, MqttSettings, SettingsError

    if problems:  # an invalid repository has no rendering to check
        print("phrame validate: node policies not checked: the repository is invalid", file=sys.stderr)
        return []
    from phrame.cli.dev_target import NoDevStack, mqtt_env

    topics = Topics(EnvReader().topic_prefix())
    try:
        # as phrame status: the PHRAME_* settings, else a dev stack's broker and read-only login
        settings = MqttSettings.from_env("actual", mqtt_env())
        client = MqttClient(
            dataclasses.replace(settings, url=url) if url else settings, f"phrame-validate-{os.getpid()}"
        )
        try:
            client.start(timeout=BROKER_TIMEOUT_S)
            retained = client.collect_retained(topics.node_status_filter(), timeout=BROKER_TIMEOUT_S)
        finally:
            client.stop()
    except (MqttError, SettingsError, NoDevStack) as e:
        print(f"phrame validate: cannot read the node policies from the broker: {e}", file=sys.stderr)
        return None
    statuses = {t.split("/")[-2]: p for t, p in retained.items()}
    policies, notes = policies_from_statuses(statuses)
    for note in notes:
        print(f"phrame validate: {note}", file=sys.stderr)
    unknown = sorted(set(repo.nodes) - set(statuses))
    if unknown:
        print(f"phrame validate: no status from node(s) {', '.join(unknown)}; not checked", file=sys.stderr)
    return policy_problems(repo, render(repo), policies)
