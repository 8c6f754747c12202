"""Hostile values and documents shared by the fuzz tests: scalars that once broke a reader
(huge integers, lone surrogates, control characters, odd tags), YAML text built from random
trees (anchors, aliases, tags, duplicate keys, deep nesting, flow and block style) and the
byte-level disguises a file can wear (BOMs, UTF-16, CRLF, stray bytes)."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import strategies as st

# scalars that once raised, or sit on a limit (YAML source text)
HOSTILE_YAML = [
    "9" * 5000, "0x" + "f" * 5000, "0o" + "7" * 900, "-" + "1" * 641, "1" * 640, "9999-99-99",
    "2024-02-30", "!!int abc", "!!int ''", "!!float abc", "!!bool maybe", "!!binary aGk=", "0x_",
    "0o_", '"\\ud800"', '"\\udfff\\ud800"', '"\\U00110000"', '"\\0"', '"\\e[2J"', '"\\x9b"', ".nan",
    "-.inf", "1e400", "~", "!!set {a}", "!!omap [a: 1]", "!!python/object/apply:os.system ['true']",
    "!!timestamp 2024-13-01", "!custom x",
    "999.1.1.1/99", "--privileged", "../../../HEAD", "100000000000000000000000h", "x" * 70_000,
    "\\u202e", "\ufeff", "\u2028", "null", "true", "1_0", "0b" + "1" * 3000,
]  # fmt: skip
# text that breaks the syntax around it: drawn less often, or few documents would get past it
BREAKERS = ["'", '"', "|", ">-", "? ", "- -", "&", "*undefined", "[" * 200, "{a: " * 100, "<<"]
# names the schemas know, so random trees reach deep into the schema rules
KEYS = [
    "name", "image", "kind", "replicas", "placement", "node", "labels", "spread", "env", "file",
    "ports", "networks", "depends_on", "command", "entrypoint", "healthcheck", "test", "interval",
    "resources", "cpus", "memory", "volumes", "restart", "replaces", "description", "capacity",
    "cordoned", "track", "defaults", "driver", "subnet", "internal", "schema", "environment",
    "assignments", "reasons", "pull", "user", "working_dir", "retries", "timeout", "<<",
]  # fmt: skip
TAGS = [
    "!!str ", "!!int ", "!!map ", "!!seq ", "!!null ", "!!float ", "!x ", "!<tag:yaml.org,2002:str> ",
    "!!set ", "!!omap ", "!!pairs ", "!!binary ", "!!timestamp ", "!!merge ",
]  # fmt: skip
ANCHORS = ["a", "b", "c"]

plain = st.text(alphabet="0123456789abcdefxoABCDEF_+-.:eEtTzZ!/@~ ", min_size=1, max_size=24)
# any code point, surrogates included: written as YAML escapes so the file itself stays UTF-8
any_char = st.one_of(
    st.characters(codec=None), st.sampled_from("\x00\x1b\x7f\x85\x9b\ud800\udfff\ufffe\uffff")
)


def quoted(text: str) -> str:
    out = []
    for c in text:
        if c.isascii() and c.isprintable() and c not in '"\\':
            out.append(c)
        else:
            out.append(f"\\u{ord(c):04x}" if ord(c) <= 0xFFFF else f"\\U{ord(c):08x}")
    return '"' + "".join(out) + '"'


scalar = st.one_of(
    plain,
    st.text(any_char, max_size=8).map(quoted),
    st.sampled_from(HOSTILE_YAML),
    st.sampled_from(KEYS),
    st.integers(0, 24).flatmap(lambda n: st.sampled_from(BREAKERS) if n == 0 else st.sampled_from(KEYS)),
)
key = st.one_of(st.sampled_from(KEYS), scalar)


def _decorate(draw: st.DrawFn, value: str) -> str:
    """An anchor, an alias instead of the value, or a tag, now and then."""
    roll = draw(st.integers(0, 19))
    if roll == 0:
        return "*" + draw(st.sampled_from(ANCHORS))
    if roll == 1:
        return f"&{draw(st.sampled_from(ANCHORS))} {value}"
    if roll == 2:
        return draw(st.sampled_from(TAGS)) + value
    return value


@st.composite
def tree(draw: st.DrawFn, depth: int = 0) -> Any:
    """A random document: ("map", [(key, child)]) / ("seq", [child]) / a scalar's text."""
    if depth >= 4 or draw(st.integers(0, 2)) == 0:
        return _decorate(draw, draw(scalar))
    if draw(st.booleans()):
        node: Any = ("map", draw(st.lists(st.tuples(key, tree(depth + 1)), max_size=4)))  # keys repeat
    else:
        node = ("seq", draw(st.lists(tree(depth + 1), max_size=4)))
    if draw(st.integers(0, 7)) == 0:  # a tag or an anchor on a collection: flow style, as text
        return _decorate(draw, draw(st.sampled_from(TAGS)) + flow(node))
    return node


def flow(node: Any) -> str:
    if isinstance(node, str):
        return node
    kind, children = node
    if kind == "map":
        return "{" + ", ".join(f"? {k} : {flow(v)}" for k, v in children) + "}"
    return "[" + ", ".join(flow(c) for c in children) + "]"


def block(node: Any, indent: int = 0) -> list[str]:
    pad = " " * indent
    if isinstance(node, str):
        return [pad + node]
    kind, children = node
    if not children:
        return [pad + ("{}" if kind == "map" else "[]")]
    lines = []
    for child in children:
        k, v = child if kind == "map" else (None, child)
        head = f"{pad}? {k}\n{pad}:" if kind == "map" and len(str(k)) > 40 else f"{pad}{k}:"
        if kind == "seq":
            head = f"{pad}-"
        if isinstance(v, str) or (isinstance(v, tuple) and not v[1]):
            lines.append(f"{head} {flow(v)}")
        else:
            lines += [head, *block(v, indent + 2)]
    return lines


@st.composite
def yaml_text(draw: st.DrawFn, top: dict[str, str] | None = None) -> str:
    """A YAML document: ``top`` (field: YAML text) first, then a random tree's mapping."""
    body = draw(tree())
    if isinstance(body, str) or body[0] != "map":
        body = ("map", [("extra", body)]) if draw(st.booleans()) else body
    lines = [f"{k}: {v}" for k, v in (top or {}).items()]
    if draw(st.integers(0, 4)) == 0:
        lines.append(flow(body) if not top else f"x: {flow(body)}")
    elif (not isinstance(body, str) and body[0] == "map") or not top:
        lines += block(body)
    depth = draw(st.sampled_from([0, 0, 0, 63, 64, 65, 200]))
    # nesting at and past the reader's limit; not 1000: ruamel's scanner is quadratic in flow
    # depth (within its 1,024-character simple-key window), ~1 s per file: a known cost
    if depth:
        lines.append("deep: " + "[" * depth + "]" * depth)
    return "\n".join(lines) + "\n"


@st.composite
def disguise(draw: st.DrawFn, text: str) -> bytes:
    """``text`` as bytes the way an editor or a hostile commit might write it."""
    how = draw(
        st.sampled_from(["utf-8", "utf-8", "utf-8", "bom", "utf-16", "latin-1", "crlf", "cr", "stray"])
    )
    if how == "bom":
        return b"\xef\xbb\xbf" + text.encode("utf-8", "surrogatepass")
    if how == "utf-16":
        return text.encode("utf-16", "surrogatepass")
    if how == "latin-1":
        return text.encode("latin-1", "replace")
    if how in ("crlf", "cr"):
        return text.replace("\n", "\r\n" if how == "crlf" else "\r").encode("utf-8", "surrogatepass")
    data = text.encode("utf-8", "surrogatepass")
    if how == "stray" and data:
        at = draw(st.integers(0, len(data)))
        data = data[:at] + draw(st.binary(min_size=1, max_size=4)) + data[at:]
    return data


BIG_INT = "1" * 5000  # json.dumps cannot write it: spliced in as text
json_leaf = st.one_of(
    st.text(any_char, max_size=8),
    st.integers(),
    st.floats(allow_nan=False, allow_infinity=False),
    st.booleans(),
    st.none(),
    st.sampled_from(["n1", "lab", "web", "phrame.placement/v1", "BIG", "x" * 70_000]),
)
json_value = st.recursive(
    json_leaf,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.dictionaries(st.one_of(st.sampled_from(KEYS), st.text(any_char, max_size=6)), inner, max_size=4),
    ),
    max_leaves=12,
)


def json_text(value: Any) -> str:
    """JSON text of ``value`` (``ensure_ascii``: surrogates become escapes), "BIG" as a huge integer."""
    return json.dumps(value).replace('"BIG"', BIG_INT)
