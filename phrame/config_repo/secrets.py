"""SOPS secrets of an environment (``secrets/<name>.sops.yaml``): their checks and what an item carries.

A service refers to a value with ``env: {KEY: {secret: <file>/<key>[/<key>...]}}``. SOPS
leaves the keys of a file in clear and encrypts every value (``ENC[AES256_GCM,...]``), so
everything here works on ciphertext: that the file is a SOPS document with age recipients,
that no value is in plaintext, that the referenced key exists, and that the file is
encrypted for the ``age_recipient`` of every node that may run a service using it. Nothing
here decrypts, and nothing here ever holds a plaintext value.

Called by the semantic rules (``secret_file_problems``, ``service_secret_problems``) and the
renderer (``item_secrets``).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from phrame.config_repo.model import ConfigRepo, Document, Environment, PathPart
from phrame.config_repo.problems import Problem
from schemas.registry import pointer

ENC_VALUE = re.compile(
    r"ENC\[AES256_GCM,data:[A-Za-z0-9+/=]*,iv:[A-Za-z0-9+/=]+,tag:[A-Za-z0-9+/=]+,type:(?:str|int|float|bool)\]"
)
SOPS_KEY = "sops"


@dataclass(frozen=True)
class SecretRef:
    """``db/password``: file ``db`` (``secrets/db.sops.yaml``), keys ``("password",)``."""

    file: str
    keys: tuple[str, ...]

    @classmethod
    def parse(cls, text: str) -> SecretRef:
        file, _, rest = text.partition("/")
        return cls(file, tuple(rest.split("/")))

    @property
    def key_path(self) -> str:
        return "/".join(self.keys)


def env_refs(env: Mapping[str, Any]) -> dict[str, SecretRef]:
    """Variable -> its SOPS reference, for the variables of a rendered or declared env that have one."""
    return {k: SecretRef.parse(v["secret"]) for k, v in env.items() if isinstance(v, dict) and "secret" in v}


def _at(doc: Document, path: list[PathPart], rule: str, message: str) -> Problem:
    line, col = doc.position(path)
    return Problem(doc.file, line, col, rule, message, pointer(path))


def age_stanzas(doc: Document) -> list[dict[str, str]] | None:
    """The file's ``sops.age`` entries (recipient, enc); None when it has no such metadata."""
    data = doc.data
    meta = data.get(SOPS_KEY) if isinstance(data, dict) else None
    if not isinstance(meta, dict) or not isinstance(meta.get("age"), list) or not meta["age"]:
        return None
    out = []
    for entry in meta["age"]:
        if not (isinstance(entry, dict) and isinstance(entry.get("recipient"), str)):
            return None
        if not isinstance(entry.get("enc"), str):
            return None
        out.append({"recipient": entry["recipient"], "enc": entry["enc"]})
    return out


def _plaintext(value: Any, path: list[PathPart]) -> Iterator[list[PathPart]]:
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _plaintext(v, [*path, k])
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _plaintext(v, [*path, i])
    elif not (isinstance(value, str) and ENC_VALUE.fullmatch(value)):
        yield path


def file_problems(doc: Document) -> Iterator[Problem]:
    """A secrets file is a SOPS document encrypted with age, and holds no plaintext value."""
    if not doc.is_readable:
        return
    if not isinstance(doc.data, dict):
        yield _at(
            doc,
            [],
            "secret-not-encrypted",
            "a SOPS file holds a mapping; encrypt it with `phrame secrets encrypt`",
        )
        return
    if age_stanzas(doc) is None:
        msg = "no SOPS metadata with age recipients (`sops.age`); encrypt it with `phrame secrets encrypt`"
        yield _at(doc, [], "secret-not-encrypted", msg)
        return
    for key, value in doc.data.items():
        if key == SOPS_KEY:
            continue
        for path in _plaintext(value, [key]):
            msg = f"{'/'.join(map(str, path))} is not encrypted (every value must be ENC[AES256_GCM,...]); "
            msg += "encrypt the file again with `phrame secrets encrypt`"
            yield _at(doc, path, "secret-not-encrypted", msg)
            return  # one is enough: never quote it, and the whole file must be encrypted again


def lookup(doc: Document, ref: SecretRef) -> str | None:
    """The encrypted value at ``ref.keys`` (never decrypted), or None."""
    if ref.keys[0] == SOPS_KEY:
        return None
    node: Any = doc.data
    for key in ref.keys:
        if not isinstance(node, dict) or key not in node:
            return None
        node = node[key]
    return node if isinstance(node, str) and ENC_VALUE.fullmatch(node) else None


def nodes_that_may_run(repo: ConfigRepo, service: Document) -> list[str]:
    """The pinned node, the nodes whose labels include the service's placement labels, or every node."""
    placement = service.data.get("placement") if service.is_sound("placement") else None
    if isinstance(placement, dict) and placement.get("node"):
        pin = str(placement["node"])
        return [pin] if pin in repo.nodes else []
    wanted = placement.get("labels", {}) if isinstance(placement, dict) else {}
    out = []
    for name, node in sorted(repo.nodes.items()):
        data = node.data if isinstance(node.data, dict) else {}
        labels = data.get("labels", {}) if node.is_sound("labels") else {}
        if not isinstance(labels, dict):
            labels = {}
        if all(k in labels and _text(labels[k]) == _text(v) for k, v in wanted.items()):
            out.append(name)
    return out


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _recipient(node: Document) -> str | None:
    if not isinstance(node.data, dict) or not node.is_sound("age_recipient"):
        return None
    value = node.data.get("age_recipient")
    return value if isinstance(value, str) else None


def _uses(env: Environment, service: Document) -> Iterator[tuple[Document, list[PathPart], SecretRef]]:
    """Each SOPS reference ``service`` gets: its own env's, then the defaults it does not override."""
    own = service.data.get("env", {}) if service.is_sound("env") else {}
    own = own if isinstance(own, dict) else {}
    for key, value in sorted(own.items()):
        if isinstance(value, dict) and isinstance(value.get("secret"), str):
            yield service, ["env", key, "secret"], SecretRef.parse(value["secret"])
    doc = env.doc
    if doc is None or not isinstance(doc.data, dict) or not doc.is_sound("defaults", "env"):
        return
    defaults = doc.data.get("defaults", {}).get("env", {})
    for key, value in sorted(defaults.items()) if isinstance(defaults, dict) else ():
        if key not in own and isinstance(value, dict) and isinstance(value.get("secret"), str):
            yield doc, ["defaults", "env", key, "secret"], SecretRef.parse(value["secret"])


def secret_file_problems(env: Environment) -> Iterator[Problem]:
    for _name, doc in sorted(env.secrets.items()):
        yield from file_problems(doc)


def service_secret_problems(repo: ConfigRepo, env: Environment, service: Document) -> Iterator[Problem]:
    """The problems of the SOPS references ``service`` gets (its own env's and the defaults')."""
    if not isinstance(service.data, dict):
        return
    for where, path, ref in _uses(env, service):
        yield from _reference_problems(repo, env, service, where, path, ref)


def _reference_problems(
    repo: ConfigRepo,
    env: Environment,
    service: Document,
    where: Document,
    path: list[PathPart],
    ref: SecretRef,
) -> Iterator[Problem]:
    secret = env.secrets.get(ref.file)
    if secret is None:
        msg = f"secret {ref.file}/{ref.key_path}: no file {env.dir}/secrets/{ref.file}.sops.yaml"
        yield _at(where, path, "secret-missing", msg)
        return
    stanzas = age_stanzas(secret) if secret.is_readable else None
    if stanzas is None or next(file_problems(secret), None) is not None:
        return  # file_problems reports the file itself
    if lookup(secret, ref) is None:
        msg = f"secret {ref.file}/{ref.key_path}: {secret.file} has no encrypted value at {ref.key_path}"
        yield _at(where, path, "secret-missing-key", msg)
        return
    recipients = {s["recipient"] for s in stanzas}
    for node in nodes_that_may_run(repo, service):
        mine = _recipient(repo.nodes[node])
        who = f"service {service.stem!r} may run on node {node!r}"
        if mine is None:
            msg = f"secret {ref.file}/{ref.key_path}: {who}, which has no age_recipient in nodes/{node}.yaml"
            yield _at(where, path, "secret-recipient-missing", msg)
        elif mine not in recipients:
            msg = (
                f"secret {ref.file}/{ref.key_path}: {who}, but {secret.file} is not encrypted for its "
                f"age_recipient; run `phrame secrets rotate {secret.file}`"
            )
            yield _at(where, path, "secret-recipient-missing", msg)


def item_secrets(env: Environment, item_env: Mapping[str, Any]) -> dict[str, Any]:
    """The ``secrets`` field of a rendered item: per SOPS file it uses, its age stanzas and
    the encrypted values its env refers to (ciphertext only). Empty when it uses none."""
    out: dict[str, Any] = {}
    for ref in env_refs(item_env).values():
        doc = env.secrets[ref.file]
        entry = out.setdefault(ref.file, {"age": age_stanzas(doc), "values": {}})
        value = lookup(doc, ref)
        assert value is not None, "render() needs a repository that validated clean"
        entry["values"][ref.key_path] = value
    return {k: out[k] for k in sorted(out)}
