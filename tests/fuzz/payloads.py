"""Hostile desired-plane messages for a node agent, from valid ones: a spec or manifest
with a value of the wrong type, a key gone or added, huge strings and numbers, deep
nesting, lone surrogates, another node's or another item's name; or bytes that are no JSON.

Plain functions of a ``random.Random`` made from a seed, so the hypothesis tests (which
print the seed of a failure) and the one broker test draw from the same hostility.
"""

from __future__ import annotations

import copy
import json
import random
from typing import Any

from schemas import Topics
from tests.support import agent_support as spec

BIG_INT = "9" * 5000
DEEP = b"[" * 5000 + b"]" * 5000  # past the JSON reader's recursion limit
ODD_VALUES: list[Any] = [
    None, True, 0, -1, 2**63, 1.5e308, -0.0, "", "x" * 2_000_000, "\ud800", "\x00\x1b[2J", "\u202e",
    [], {}, [None], {"": None}, "sha256:" + "0" * 64, "../../etc/passwd", "--privileged", "BIG",
    "node-other", "e.web.0", "DEEP", ["sh", "-c", "reboot"], {"file": "/etc/shadow"},
]  # fmt: skip
KINDS = ("containers", "networks", "processes")


def valid_items(env: str = "e") -> list[dict[str, Any]]:
    return [
        spec.container(
            env,
            "web",
            image="img:1",
            ports=[{"host_ip": "127.0.0.1", "host_port": 8080, "container_port": 80, "protocol": "tcp"}],
            env={"A": "1"},
        ),
        spec.network(env, "net"),
        spec.process(env, "job", ["sleep", "600"], env={"B": "2"}),
    ]


def _nested(rng: random.Random) -> Any:
    depth = rng.choice([10, 64, 100, 400])  # deeper: "DEEP", spliced in as text
    value: Any = rng.choice([1, "x", None])
    for _ in range(depth):
        value = [value] if rng.random() < 0.5 else {"a": value}
    return value


def _odd(rng: random.Random) -> Any:
    # a copy: a later change to the document must not change the list (state across examples)
    return _nested(rng) if rng.random() < 0.1 else copy.deepcopy(rng.choice(ODD_VALUES))


def _paths(value: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [path]
    if isinstance(value, dict):
        for k, v in value.items():
            out += _paths(v, (*path, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            out += _paths(v, (*path, i))
    return out


def mutate(doc: Any, rng: random.Random, *, times: int = 1) -> Any:
    """``doc`` (a copy) with ``times`` random changes at random places."""
    doc = json.loads(json.dumps(doc))
    for _ in range(times):
        path = rng.choice(_paths(doc))
        if not path:
            doc = _odd(rng)
            continue
        parent = doc
        for step in path[:-1]:
            parent = parent[step]
        last = path[-1]
        roll = rng.random()
        if roll < 0.2:
            del parent[last]
        elif roll < 0.3 and isinstance(parent, dict):
            parent[rng.choice(["extra", "", "\ud800", "name2", "digest"])] = _odd(rng)
        else:
            parent[last] = _odd(rng)
    return doc


def encode(doc: Any, rng: random.Random) -> bytes:
    """JSON bytes; sometimes raw (a surrogate becomes bytes UTF-8 forbids), "BIG" a huge int."""
    if rng.random() < 0.3:
        text = json.dumps(doc, ensure_ascii=False)
        data = text.encode("utf-8", "surrogatepass")
    else:
        data = json.dumps(doc).encode()
    return data.replace(b'"BIG"', BIG_INT.encode()).replace(b'"DEEP"', DEEP)


def garbage(rng: random.Random) -> bytes:
    shapes = [
        lambda: rng.randbytes(rng.randint(1, 64)),
        lambda: b"[" * rng.randint(1, 200_000),
        lambda: b'{"a":' * 5000,
        lambda: BIG_INT.encode(),
        lambda: b"\xef\xbb\xbf{}",
        lambda: b"NaN",
        lambda: b'{"name": 1e999}',
        lambda: b"\x00",
        lambda: b'"\\ud800"',
    ]
    return rng.choice(shapes)()


def hostile_message(rng: random.Random, node: str, *, env: str = "e") -> tuple[str, bytes]:
    """One message on one of ``node``'s desired topics (or its neighbours')."""
    t = Topics()
    items = valid_items(env)
    target = rng.choice([*items, None])
    if target is None:
        topic = t.manifest(node)
        base: Any = spec.manifest(items)
    else:
        kind = spec.kind_of(target)
        if rng.random() < 0.2:  # the payload of another kind or item on this topic
            kind = rng.choice(KINDS)
        item_id = target["name"]
        if rng.random() < 0.2:
            item_id = rng.choice([f"{env}.other.0", f"{env}.web.1", f"{env}.job.0", f"{env}.net"])
        topic = t.desired_item(node, kind, item_id) if kind != "networks" or "." in item_id else ""
        topic = topic or t.desired_item(node, "networks", f"{env}.net")
        base = target
    roll = rng.random()
    if roll < 0.15:
        return topic, garbage(rng)
    if roll < 0.2:  # a neighbour's topic or no topic of the layout
        other = rng.choice([t.manifest("node-other"), topic + "/x", topic.replace("/nodes/", "/nodes/A/")])
        return other, encode(base, rng)
    return topic, encode(mutate(base, rng, times=rng.randint(1, 3)), rng)
