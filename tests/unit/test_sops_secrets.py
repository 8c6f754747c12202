"""SOPS + age secrets with the real ``sops`` binary and keys made here: validation (file:line),
rendering (ciphertext only, the digest follows the ciphertext), decryption as the agent
does it, the key file's mode, and ``phrame secrets encrypt|edit|rotate``."""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

import pytest
import yaml

from node_agent.container_config import resolve_env
from node_agent.container_logs import secret_values
from node_agent.errors import SettingsError, SpecError
from node_agent.settings import AgentSettings
from node_agent.sops_secrets import SopsSecrets
from phrame.cli import main
from phrame.config_repo.loader import load_directory
from phrame.config_repo.model import ConfigRepo
from phrame.config_repo.render import render
from phrame.config_repo.validate import validate
from phrame.sops import keys
from phrame.sops.values import SecretError, data_key, decrypt_value
from tests.support.sops import item_secrets, make_key, need_sops, sops_encrypt

PASSWORD = "hunter2-plaintext"
API_TOKEN = "api-t0ken-plaintext"


@pytest.fixture(autouse=True)
def _sops() -> None:
    need_sops()


def _repo(root: Path, recipients: dict[str, str | None]) -> Path:
    """Nodes n1 (role=db), n2 and n3 (role=web); lab: db pinned to n1 using db/password,
    web placed by role=web using api/token, plain without secrets."""
    (root / "nodes").mkdir(parents=True)
    for node, role in (("n1", "db"), ("n2", "web"), ("n3", "web")):
        recipient = recipients.get(node)
        line = f"age_recipient: {recipient}\n" if recipient else ""
        (root / f"nodes/{node}.yaml").write_text(f"name: {node}\n{line}labels:\n  role: {role}\n")
    env = root / "environments/lab"
    (env / "services").mkdir(parents=True)
    (env / "environment.yaml").write_text("name: lab\ntrack: main\n")
    (env / "services/db.yaml").write_text(
        "name: db\nimage: a:1\nplacement:\n  node: n1\nenv:\n  DB_PASSWORD:\n    secret: db/password\n"
    )
    (env / "services/web.yaml").write_text(
        "name: web\nimage: a:1\nreplicas: 2\nplacement:\n  labels:\n    role: web\n  spread: true\n"
        "env:\n  TOKEN:\n    secret: api/token\n  PLAIN: x\n"
    )
    (env / "services/plain.yaml").write_text("name: plain\nimage: a:1\nplacement:\n  node: n2\n")
    (env / "node.json").write_text(
        json.dumps(
            {"schema": "phrame.placement/v1", "environment": "lab", "assignments": {"web": ["n2", "n3"]}}
        )
        + "\n"
    )
    return root


def _load(root: Path) -> tuple[ConfigRepo, list[str]]:
    repo, problems = load_directory(root)
    return repo, [p.format() for p in validate(repo, problems)]


@pytest.fixture
def lab(tmp_path: Path) -> dict[str, object]:
    made = {n: make_key(tmp_path / "keys", n) for n in ("n1", "n2", "n3")}
    root = _repo(tmp_path / "repo", {n: r for n, (_, r) in made.items()})
    secrets = root / "environments/lab/secrets"
    sops_encrypt({"password": PASSWORD, "user": "admin"}, [made["n1"][1]], secrets / "db.sops.yaml")
    sops_encrypt({"token": API_TOKEN}, [made["n2"][1], made["n3"][1]], secrets / "api.sops.yaml")
    return {"root": root, "keys": made, "secrets": secrets}


def test_a_repository_whose_secrets_fit_validates_and_renders_ciphertext_only(lab: dict) -> None:
    repo, problems = _load(lab["root"])
    assert problems == []
    rendered = render(repo)
    published = json.dumps(rendered.topics())
    assert PASSWORD not in published and API_TOKEN not in published and "admin" not in published
    item = rendered.nodes["n1"].items["containers/lab.db.0"]
    assert item["env"] == {"DB_PASSWORD": {"secret": "db/password"}}
    assert list(item["secrets"]) == ["db"] and list(item["secrets"]["db"]["values"]) == ["password"]
    assert item["secrets"]["db"]["values"]["password"].startswith("ENC[AES256_GCM,data:")
    assert "secrets" not in rendered.nodes["n2"].items["containers/lab.plain.0"]  # no secret, no field
    # each node's agent decrypts with its own key, as the agent does
    for node, item_id, var, want in (
        ("n1", "lab.db.0", "DB_PASSWORD", PASSWORD),
        ("n3", "lab.web.1", "TOKEN", API_TOKEN),
    ):
        spec = rendered.nodes[node].items[f"containers/{item_id}"]
        sops = SopsSecrets(keys.load(lab["keys"][node][0]))
        env = resolve_env(spec["env"], item_id, sops=sops, encrypted=spec["secrets"])
        assert env[var] == want
        assert secret_values(spec, lambda _n: "", sops) == [want]  # masked in log tails


def test_each_broken_reference_is_reported_at_its_line(lab: dict, tmp_path: Path) -> None:
    root: Path = lab["root"]
    web = root / "environments/lab/services/web.yaml"
    web.write_text(web.read_text().replace("api/token", "api/nope"))
    db = root / "environments/lab/services/db.yaml"
    db.write_text(db.read_text().replace("db/password", "vault/password"))
    _, problems = _load(root)
    assert problems == [
        "environments/lab/services/db.yaml:7:13: secret-missing: secret vault/password: "
        "no file environments/lab/secrets/vault.sops.yaml",
        "environments/lab/services/web.yaml:10:13: secret-missing-key: secret api/nope: "
        "environments/lab/secrets/api.sops.yaml has no encrypted value at nope",
    ]


def test_a_file_not_encrypted_for_a_node_that_may_run_the_service_is_reported(lab: dict) -> None:
    root: Path = lab["root"]
    # web may run on every role=web node: n3 is one, and the file is for n2 only
    sops_encrypt({"token": API_TOKEN}, [lab["keys"]["n2"][1]], lab["secrets"] / "api.sops.yaml")
    _, problems = _load(root)
    assert len(problems) == 1 and "secret-recipient-missing" in problems[0]
    assert problems[0].startswith("environments/lab/services/web.yaml:10:13:")
    assert (
        "node 'n3'" in problems[0]
        and "phrame secrets rotate environments/lab/secrets/api.sops.yaml" in problems[0]
    )
    # a node without an age_recipient cannot decrypt anything either
    n3 = root / "nodes/n3.yaml"
    n3.write_text("name: n3\nlabels:\n  role: web\n")
    _, problems = _load(root)
    assert problems == [
        "environments/lab/services/web.yaml:10:13: secret-recipient-missing: secret api/token: service "
        "'web' may run on node 'n3', which has no age_recipient in nodes/n3.yaml"
    ]


def test_plaintext_and_unencrypted_files_are_refused(lab: dict) -> None:
    api = lab["secrets"] / "api.sops.yaml"
    text = api.read_text()
    api.write_text(text.replace(text.split("\n", 1)[0], f"token: {API_TOKEN}"))
    _, problems = _load(lab["root"])
    assert problems == [
        "environments/lab/secrets/api.sops.yaml:1:8: secret-not-encrypted: token is not encrypted "
        "(every value must be ENC[AES256_GCM,...]); encrypt the file again with `phrame secrets encrypt`"
    ]
    assert API_TOKEN not in problems[0]
    api.write_text(f"token: {API_TOKEN}\n")  # never encrypted at all
    _, problems = _load(lab["root"])
    assert problems[0].startswith("environments/lab/secrets/api.sops.yaml:1:1: secret-not-encrypted: no SOPS")
    (lab["secrets"] / "notes.txt").write_text("x")
    _, problems = _load(lab["root"])
    assert any("secrets/notes.txt:1:1: unknown-file" in p for p in problems)


def test_defaults_env_secrets_are_checked_for_every_service_that_inherits_them(lab: dict) -> None:
    root: Path = lab["root"]
    (root / "environments/lab/environment.yaml").write_text(
        "name: lab\ntrack: main\ndefaults:\n  env:\n    DB_PASSWORD:\n      secret: db/password\n"
    )
    _, problems = _load(root)
    # db.sops.yaml is for n1 only; web and plain (inheriting it) run on n2 and n3
    assert problems == [
        "environments/lab/environment.yaml:6:15: secret-recipient-missing: secret db/password: service "
        f"{svc!r} may run on node {node!r}, but environments/lab/secrets/db.sops.yaml is not encrypted "
        "for its age_recipient; run `phrame secrets rotate environments/lab/secrets/db.sops.yaml`"
        for svc, node in (("plain", "n2"), ("web", "n2"), ("web", "n3"))
    ]


def test_a_rotated_secret_changes_the_digest_of_exactly_its_users(lab: dict) -> None:
    before = render(_load(lab["root"])[0])
    sops_encrypt(
        {"token": "rotated-" + API_TOKEN},
        [lab["keys"]["n2"][1], lab["keys"]["n3"][1]],
        lab["secrets"] / "api.sops.yaml",
    )
    after = render(_load(lab["root"])[0])

    def digests(r: object) -> dict[str, str]:
        return {f"{n}/{k}": v["digest"] for n, nd in r.nodes.items() for k, v in nd.items.items()}  # type: ignore[attr-defined]

    old, new = digests(before), digests(after)
    changed = sorted(k for k in old if old[k] != new[k])
    assert changed == ["n2/containers/lab.web.0", "n3/containers/lab.web.1"]


def test_decryption_failures_say_why_without_the_value(lab: dict) -> None:
    sops_file = lab["secrets"] / "db.sops.yaml"
    secrets = {"db": item_secrets(sops_file, "password")}
    env = {"P": {"secret": "db/password"}}
    with pytest.raises(SpecError, match="PHRAME_AGE_KEY_FILE is not set"):
        resolve_env(env, "lab.db.0", sops=SopsSecrets(None), encrypted=secrets)
    other = SopsSecrets(keys.load(lab["keys"]["n2"][0]))
    with pytest.raises(
        SpecError,
        match=r"lab\.db\.0: env P: secret db/password: cannot decrypt: .*not encrypted for this node",
    ):
        resolve_env(env, "lab.db.0", sops=other, encrypted=secrets)
    mine = keys.load(lab["keys"]["n1"][0])
    key = data_key(secrets["db"]["age"], mine)  # type: ignore[index]
    enc = secrets["db"]["values"]["password"]  # type: ignore[index]
    assert decrypt_value(key, enc, ["password"]) == PASSWORD
    with pytest.raises(SecretError, match="does not authenticate") as moved:
        decrypt_value(key, enc, ["user"])  # SOPS binds a value to its key path
    assert PASSWORD not in str(moved.value)
    with pytest.raises(SpecError, match="carries no encrypted value"):
        resolve_env({"P": {"secret": "db/user"}}, "x", sops=SopsSecrets(mine), encrypted=secrets)


def test_the_key_file_must_be_private(tmp_path: Path) -> None:
    path, recipient = make_key(tmp_path, "n")
    assert (path.stat().st_mode & 0o777) == 0o600 and recipient.startswith("age1")
    assert keys.load(path).recipients == {recipient}
    assert (
        AgentSettings.from_env({"PHRAME_NODE_NAME": "n", "PHRAME_AGE_KEY_FILE": str(path)}).age_keys
        is not None
    )
    path.chmod(0o644)
    with pytest.raises(SettingsError, match=r"has mode 0644: its group or others may read the private key"):
        AgentSettings.from_env({"PHRAME_NODE_NAME": "n", "PHRAME_AGE_KEY_FILE": str(path)})
    empty = tmp_path / "empty.key"
    empty.write_text("# nothing\n")
    empty.chmod(0o600)
    with pytest.raises(keys.AgeKeyError, match="holds no age private key"):
        keys.load(empty)
    bad = tmp_path / "bad.key"
    bad.write_text("AGE-SECRET-KEY-1NOTAKEY\n")
    bad.chmod(0o600)
    with pytest.raises(keys.AgeKeyError, match="line 1 is no age private key") as refused:
        keys.load(bad)
    assert "NOTAKEY" not in str(refused.value)


def test_cli_encrypt_rotate_and_edit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    made = {n: make_key(tmp_path / "keys", n) for n in ("n1", "n2", "n3")}
    operator_key, operator = make_key(tmp_path / "keys", "operator")
    root = _repo(tmp_path / "repo", {n: r for n, (_, r) in made.items()})
    target = root / "environments/lab/secrets/db.sops.yaml"
    plain = tmp_path / "plain.yaml"
    plain.write_text(f"password: {PASSWORD}\n")
    assert main(["secrets", "encrypt", str(plain), str(target), "--age-recipient", operator]) == 0
    doc = yaml.safe_load(target.read_text())
    # every node that may run a service of lab, and the operator
    assert {s["recipient"] for s in doc["sops"]["age"]} == {r for _, r in made.values()} | {operator}
    assert PASSWORD not in target.read_text()
    # api.sops.yaml is still missing: the only problem left
    _, problems = _load(root)
    assert [p.split(": ")[1] for p in problems] == ["secret-missing"]

    monkeypatch.setenv("SOPS_AGE_KEY_FILE", str(operator_key))
    old_enc = doc["sops"]["age"][0]["enc"]
    assert main(["secrets", "rotate", str(target), "--age-recipient", operator]) == 0
    rotated = yaml.safe_load(target.read_text())
    assert rotated["sops"]["age"][0]["enc"] != old_enc and rotated["password"] != doc["password"]
    n1 = SopsSecrets(keys.load(made["n1"][0]))
    assert n1.value({"db": item_secrets(target, "password")}, "db/password") == PASSWORD

    editor = tmp_path / "editor.sh"
    editor.write_text(f"#!/bin/sh\n{shutil.which('sed')} -i 's/{PASSWORD}/edited-{PASSWORD}/' \"$1\"\n")
    editor.chmod(0o700)
    monkeypatch.setenv("EDITOR", str(editor))
    monkeypatch.delenv("VISUAL", raising=False)
    assert main(["secrets", "edit", str(target), "--age-recipient", operator]) == 0
    assert n1.value({"db": item_secrets(target, "password")}, "db/password") == "edited-" + PASSWORD
    assert PASSWORD not in capsys.readouterr().err

    # usage errors: a path outside the layout, a file that is already SOPS
    assert main(["secrets", "encrypt", str(plain), str(tmp_path / "x.sops.yaml")]) == 2
    assert main(["secrets", "encrypt", str(target), str(target)]) == 2
    # no operator key: sops refuses, nothing is written
    monkeypatch.setenv("SOPS_AGE_KEY_FILE", str(made["n1"][0]) + ".missing")
    before = target.read_text()
    assert main(["secrets", "rotate", str(target)]) == 1
    assert target.read_text() == before
    assert sys.executable  # the sops binary beside it is what ran
    assert os.access(target, os.R_OK)
