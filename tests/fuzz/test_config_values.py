"""Fuzzing what a commit can write into a config file (issue 10, "keep it closed"): any key,
any scalar the YAML resolver or a tag turns into something, any character as an escape, and
the same in ``node.json``. Validation must never raise, every problem must print and encode
(config-sync publishes them), and whatever validates must render to encodable payloads."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from config_repo import load_directory, render, validate
from schemas import canonical_json

SETTINGS = settings(
    max_examples=int(os.environ.get("FUZZ_EXAMPLES", "150")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
BASE = {
    "nodes/n1.yaml": "name: n1\ncapacity: {cpus: 4, memory: 8Gi}\n",
    "environments/lab/environment.yaml": "name: lab\n",
}
HEAD = "name: web\nimage: x:1\nplacement:\n  node: n1\n"

# scalars that once raised, or sit on a limit: a regression list the generator mixes in
HOSTILE = [
    "9" * 5000, "0x" + "f" * 5000, "0o" + "7" * 900, "-" + "1" * 641, "1" * 640, "9999-99-99",
    "2024-02-30", "!!int abc", "!!int ''", "!!float abc", "!!bool maybe", "!!binary aGk=", "0x_",
    "0o_", '"\\ud800"', '"\\U00110000"', '"\\0"', '"\\e[2J"', ".nan", "-.inf", "1e400", "~", "!!set {a}",
    "999.1.1.1/99", "--privileged", "../../../HEAD", "100000000000000000000000h",
]  # fmt: skip
plain = st.text(alphabet="0123456789abcdefxoABCDEF_+-.:eEtTzZ!/@~ ", min_size=1, max_size=24)
# any code point, surrogates included: written as YAML escapes, so the file itself is UTF-8
any_char = st.one_of(st.characters(codec=None), st.sampled_from("\x00\x1b\x7f\x85\x9b\ud800\udfff\ufffe"))


def quoted(text: str) -> str:
    out = []
    for c in text:
        if c.isascii() and c.isprintable() and c not in '"\\':
            out.append(c)
        else:
            out.append(f"\\u{ord(c):04x}" if ord(c) <= 0xFFFF else f"\\U{ord(c):08x}")
    return '"' + "".join(out) + '"'


scalar = st.one_of(plain, st.text(any_char, max_size=8).map(quoted), st.sampled_from(HOSTILE))
key = st.one_of(st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,8}", fullmatch=True), scalar)
FIELDS = ["description", "replicas", "image", "command", "restart", "pull"]
MAPS = ["env", "labels", "resources", "healthcheck"]


@st.composite
def service_files(draw: st.DrawFn) -> str:
    lines = []
    for field in draw(st.lists(st.sampled_from(FIELDS), max_size=3, unique=True)):
        lines.append(f"{field}: {draw(scalar)}")
    for field in draw(st.lists(st.sampled_from(MAPS), max_size=2, unique=True)):
        entries = draw(st.lists(st.tuples(key, scalar), min_size=1, max_size=3))
        if field == "healthcheck":
            entries = [("test", "'true'"), *entries]
        lines.append(f"{field}:")
        lines += [f"  ? {k}\n  : {v}" for k, v in entries]
    ports = draw(st.lists(scalar, max_size=2))
    if ports:
        lines += ["ports:", *(f"  - {port}" for port in ports)]
    return HEAD + "\n".join(lines) + "\n"


json_value = st.one_of(
    st.text(any_char, max_size=6), st.integers(), st.sampled_from(["n1", None]), st.just(10**700)
)


def node_json(reasons: dict[str, object], nodes: list[object]) -> str:
    doc = {"schema": "phrame.placement/v1", "environment": "lab", "assignments": {"web": nodes}}
    text = json.dumps({**doc, "reasons": reasons})  # ensure_ascii: surrogates become escapes
    # json.dumps cannot write an integer past Python's limit: splice one in as text
    return text.replace('"BIG"', "1" * 5000)


def check(files: dict[str, str]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        for name, text in {**BASE, **files}.items():
            (root / name).parent.mkdir(parents=True, exist_ok=True)
            (root / name).write_text(text, "utf-8")
        repo, read = load_directory(root)
        problems = validate(repo, read)
    for p in problems:
        p.format().encode("utf-8")
        canonical_json(p.to_dict())
    if not problems:
        for payload in render(repo).topics().values():
            canonical_json(payload)


@SETTINGS
@given(text=service_files())
def test_any_service_file_validates_without_raising(text: str) -> None:
    check({"environments/lab/services/web.yaml": text})


@SETTINGS
@given(
    reasons=st.dictionaries(st.text(any_char, max_size=6), st.one_of(json_value, st.just("BIG")), max_size=3),
    nodes=st.lists(st.one_of(json_value, st.just("BIG")), max_size=3),
)
def test_any_node_json_validates_without_raising(reasons: dict[str, object], nodes: list[object]) -> None:
    service = HEAD.replace("placement:\n  node: n1\n", "placement:\n  labels: {}\n")
    check(
        {
            "environments/lab/node.json": node_json(reasons, nodes),
            "environments/lab/services/web.yaml": service,
        }
    )
