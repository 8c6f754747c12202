"""Fuzzing what a commit can write into a config file ("keep it closed"): any key,
any scalar the YAML resolver or a tag turns into something, any character as an escape, and
the same in ``node.json``, inside an otherwise sound service. Validation must never raise,
every problem must print and encode (config-sync publishes them), whatever validates must
render to encodable payloads, and placement must read it (:mod:`tests.fuzz.config_check`)."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from tests.fuzz.config_check import check_repo
from tests.fuzz.hostile import BIG_INT, any_char, key, scalar
from tests.fuzz.profile import fuzz

BASE = {
    "nodes/n1.yaml": "name: n1\ncapacity: {cpus: 4, memory: 8Gi}\n",
    "environments/lab/environment.yaml": "name: lab\n",
}
HEAD = "name: web\nimage: x:1\nplacement:\n  node: n1\n"
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
    return text.replace('"BIG"', BIG_INT)


@fuzz()
@given(text=service_files())
def test_any_service_file_validates_without_raising(text: str) -> None:
    check_repo({**BASE, "environments/lab/services/web.yaml": text})


@fuzz()
@given(
    reasons=st.dictionaries(st.text(any_char, max_size=6), st.one_of(json_value, st.just("BIG")), max_size=3),
    nodes=st.lists(st.one_of(json_value, st.just("BIG")), max_size=3),
)
def test_any_node_json_validates_without_raising(reasons: dict[str, object], nodes: list[object]) -> None:
    service = HEAD.replace("placement:\n  node: n1\n", "placement:\n  labels: {}\n")
    check_repo(
        {
            **BASE,
            "environments/lab/node.json": node_json(reasons, nodes),
            "environments/lab/services/web.yaml": service,
        }
    )
