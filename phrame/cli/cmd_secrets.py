"""``phrame secrets encrypt|edit|rotate``: SOPS files of an environment (docs/operations/secrets.md).

Every command names the SOPS file ``<repo>/environments/<env>/secrets/<name>.sops.yaml``;
the repository and the environment are read from that path. The file is encrypted for the
``age_recipient`` of every node that may run a service of the environment (pins, placement
labels, else every node), plus each ``--age-recipient`` (an operator's own key, so that
they can ``edit`` it later). ``encrypt`` reads a plaintext YAML file; ``edit`` decrypts with
the operator's key (sops reads ``SOPS_AGE_KEY_FILE``) into a 0600 temporary file, runs
``$EDITOR`` and encrypts the result; ``rotate`` does the same without the editor: a new
data key, for the current recipients. Exit 0 done, 1 sops or the repository refused, 2 usage.
"""

from __future__ import annotations

import argparse
import os
import shlex
import subprocess
import sys
from pathlib import Path

import yaml

from phrame.config_repo.loader import load_directory, secret_file_name
from phrame.config_repo.secrets import nodes_that_may_run
from phrame.sops import tool


def configure(parser: argparse.ArgumentParser) -> None:
    subs = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    enc = subs.add_parser(
        "encrypt", help="encrypt a plaintext YAML file into FILE for the environment's nodes"
    )
    enc.add_argument(
        "plaintext", help="a YAML mapping of the values (keys stay readable, values are encrypted)"
    )
    enc.add_argument(
        "file", help="the SOPS file to write: <repo>/environments/<env>/secrets/<name>.sops.yaml"
    )
    edit = subs.add_parser("edit", help="decrypt FILE with your age key, run $EDITOR, encrypt it again")
    edit.add_argument("file")
    rot = subs.add_parser("rotate", help="encrypt FILE again with a new data key for the current recipients")
    rot.add_argument("file")
    for p in (enc, edit, rot):
        p.add_argument(
            "--age-recipient",
            action="append",
            default=[],
            metavar="AGE1...",
            help="encrypt for this age recipient too (an operator's key); repeatable",
        )


class _Usage(Exception):
    pass


def _layout(file: Path) -> tuple[Path, str, str]:
    """(repository root, environment, secret name) of a SOPS file's path."""
    name = secret_file_name(file.name)
    parts = file.resolve().parts
    if name is None or len(parts) < 5 or parts[-2] != "secrets" or parts[-4] != "environments":
        raise _Usage(f"{file}: expected <repo>/environments/<env>/secrets/<name>.sops.yaml")
    return Path(*parts[:-4]), parts[-3], name


def recipients(file: Path, extra: list[str]) -> list[str]:
    """The age recipients ``file`` is encrypted for: the nodes that may run a service of its environment."""
    root, env_name, _ = _layout(file)
    repo, _problems = load_directory(root)
    env = repo.environments.get(env_name)
    if env is None:
        raise _Usage(f"{file}: no environment {env_name!r} in {root}")
    nodes: set[str] = set()
    for service in env.services.values():
        if isinstance(service.data, dict):
            nodes.update(nodes_that_may_run(repo, service))
    if not env.services:
        nodes = set(repo.nodes)
    found = set(extra)
    for node in sorted(nodes):
        data = repo.nodes[node].data
        recipient = data.get("age_recipient") if isinstance(data, dict) else None
        if isinstance(recipient, str):
            found.add(recipient)
        else:
            print(
                f"phrame secrets: node {node!r} has no age_recipient in nodes/{node}.yaml; skipped",
                file=sys.stderr,
            )
    if not found:
        raise _Usage(
            f"{file}: no node of environment {env_name!r} has an age_recipient, and no --age-recipient"
        )
    return sorted(found)


def _check_plaintext(path: Path) -> None:
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as e:
        raise _Usage(f"{path}: cannot read it as YAML ({e.__class__.__name__})") from None
    if not isinstance(data, dict) or not data:
        raise _Usage(f"{path}: a secrets file holds a mapping of keys to values")
    if "sops" in data:
        raise _Usage(f"{path}: already a SOPS file (it has a `sops` key); use `phrame secrets rotate`")


def _encrypt(plain: Path, target: Path, extra: list[str]) -> None:
    _check_plaintext(plain)
    text = tool.encrypt(plain, recipients(target, extra))
    target.parent.mkdir(parents=True, exist_ok=True)
    tool.write_encrypted(target, text)


def run(args: argparse.Namespace) -> int:
    target = Path(args.file)
    try:
        if args.action == "encrypt":
            _encrypt(Path(args.plaintext), target, args.age_recipient)
        else:
            if not target.is_file():
                raise _Usage(f"{target}: no such file")
            with tool.private_dir() as tmp:
                plain = tmp / "plaintext.yaml"
                tool.decrypt_to(target, plain)
                if args.action == "edit":
                    editor = os.environ.get("VISUAL") or os.environ.get("EDITOR") or "vi"
                    if subprocess.run([*shlex.split(editor), str(plain)], check=False).returncode != 0:
                        print("phrame secrets: the editor failed; the file is unchanged", file=sys.stderr)
                        return 1
                _encrypt(plain, target, args.age_recipient)
    except _Usage as e:
        print(f"phrame secrets: {e}", file=sys.stderr)
        return 2
    except tool.SopsError as e:
        print(f"phrame secrets: {e}", file=sys.stderr)
        return 1
    print(f"phrame secrets: wrote {target}", file=sys.stderr)
    return 0
