"""Whole config files from nothing: random YAML documents in every place of the layout
(random trees with hostile scalars, anchors, aliases, tags, duplicate keys, deep nesting,
BOMs, UTF-16, CRLF, stray bytes), random ``node.json`` documents, and random file names.
The property is :func:`tests.fuzz.config_check.check_repo`."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from tests.fuzz.config_check import check_repo
from tests.fuzz.hostile import disguise, json_text, json_value, scalar, yaml_text
from tests.fuzz.profile import fuzz

SOUND = {
    "nodes/n1.yaml": "name: n1\ncapacity: {cpus: 4, memory: 8Gi}\nlabels: {gpu: true}\n",
    "nodes/n2.yaml": "name: n2\n",
    "environments/lab/environment.yaml": "name: lab\nplacement: auto\n",
    "environments/lab/networks/net.yaml": "name: net\n",
    "environments/lab/services/web.yaml": "name: web\nimage: x:1\nreplicas: 2\nnetworks: [net]\n"
    "placement: {labels: {gpu: 'true'}}\n",
    "environments/lab/services/job.yaml": "name: job\nkind: process\ncommand: [sleep, '1']\n"
    "placement: {node: n1}\n",
    "environments/lab/node.json": '{"schema": "phrame.placement/v1", "environment": "lab", '
    '"assignments": {"web": ["n1", "n2"]}}\n',
    "environments/other/environment.yaml": "name: other\n",
    "environments/other/services/db.yaml": "name: db\nimage: db:1\nresources: {cpus: 1, memory: 1Gi}\n"
    "placement: {node: n2}\n",
}
# each place with the fields that get a document past its name check
PLACES = {
    "nodes/n1.yaml": {"name": "n1"},
    "environments/lab/environment.yaml": {"name": "lab"},
    "environments/lab/networks/net.yaml": {"name": "net"},
    "environments/lab/services/web.yaml": {"name": "web", "image": "x:1"},
    "environments/lab/services/job.yaml": {"name": "job", "kind": "process"},
    "environments/other/services/db.yaml": {"name": "db"},
}


def test_the_sound_repo_is_valid() -> None:
    """The base the fuzzers break must itself be valid, or they test only the error path."""
    assert check_repo(SOUND) == []


@fuzz()
@given(data=st.data(), place=st.sampled_from(sorted(PLACES)), named=st.booleans())
def test_any_yaml_file_in_any_place(data: st.DataObject, place: str, named: bool) -> None:
    text = data.draw(yaml_text(PLACES[place] if named else None))
    check_repo({**SOUND, place: data.draw(disguise(text))})


@fuzz()
@given(data=st.data(), doc=json_value, sound=st.booleans())
def test_any_node_json(data: st.DataObject, doc: object, sound: bool) -> None:
    if sound and isinstance(doc, dict):  # past the header checks, into the assignments
        doc = {"schema": "phrame.placement/v1", "environment": "lab", **doc}
    text = json_text(doc)
    check_repo({**SOUND, "environments/lab/node.json": data.draw(disguise(text))})


@fuzz(0.5)
@given(
    folder=st.sampled_from(["nodes", "environments", "environments/lab", "environments/lab/services"]),
    name=st.text(min_size=1, max_size=40).filter(
        lambda n: "/" not in n and "\x00" not in n and n not in ".."
    ),
    suffix=st.sampled_from([".yaml", ".yml", ".json", ""]),
    body=scalar,
)
def test_any_file_name(folder: str, name: str, suffix: str, body: str) -> None:
    path = f"{folder}/{name}{suffix}"
    if len(path.encode("utf-8", "surrogatepass")) > 200 or path in SOUND:
        return
    try:
        path.encode("utf-8")
    except UnicodeEncodeError:
        return  # a surrogate cannot be a file name on this file system
    check_repo({**SOUND, path: f"name: {body}\n"})
