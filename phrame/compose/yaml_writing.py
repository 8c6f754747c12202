"""Writing YAML that both readers agree on: ruamel.yaml (YAML 1.2, the config repo) and
docker-compose (PyYAML, YAML 1.1).

A string YAML 1.1 would read as something else (``no``, ``on``, ``0755``, ``5000:50``,
``1e3``, ``~``) is double-quoted, so ``restart: "no"`` stays a string for compose too.
Block style, two-space indent, insertion order kept: the same input gives the same bytes.
"""

from __future__ import annotations

import io
import re
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap, CommentedSeq
from ruamel.yaml.scalarstring import DoubleQuotedScalarString

# YAML 1.1 implicit types (PyYAML's resolvers), and anything YAML 1.2 reads otherwise
_AMBIGUOUS = re.compile(
    r"""^(?:
      y|Y|yes|Yes|YES|n|N|no|No|NO|true|True|TRUE|false|False|FALSE|on|On|ON|off|Off|OFF
    | ~|null|Null|NULL
    | [-+]?(?:0b[01_]+|0x[0-9a-fA-F_]+|0o?[0-7_]+|[0-9][0-9_]*(?::[0-5]?[0-9])*|\.[0-9_]+)
    | [-+]?(?:[0-9][0-9_]*)?\.[0-9_]*(?:[eE][-+]?[0-9]+)?
    | [-+]?[0-9][0-9_]*[eE][-+]?[0-9]+
    | [-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN)
    | [0-9]{4}-[0-9]{1,2}-[0-9]{1,2}.*
    | =|<<
    )$""",
    re.VERBOSE,
)


def needs_quotes(text: str) -> bool:
    return text == "" or bool(_AMBIGUOUS.match(text)) or text != text.strip()


def quoted(text: str) -> DoubleQuotedScalarString:
    value: DoubleQuotedScalarString = DoubleQuotedScalarString(text)
    return value


def to_yaml_tree(value: Any) -> Any:
    """Plain dicts/lists → ruamel's commented containers, ambiguous strings quoted."""
    if isinstance(value, CommentedMap):
        for k in list(value):
            value[k] = to_yaml_tree(value[k])
        return value
    if isinstance(value, dict):
        return CommentedMap((k, to_yaml_tree(v)) for k, v in value.items())
    if isinstance(value, CommentedSeq):
        for i, v in enumerate(value):
            value[i] = to_yaml_tree(v)
        return value
    if isinstance(value, list):
        return CommentedSeq(to_yaml_tree(v) for v in value)
    if isinstance(value, str) and not isinstance(value, DoubleQuotedScalarString) and needs_quotes(value):
        return quoted(value)
    return value


def dump(tree: Any) -> str:
    y = YAML(typ="rt")
    y.default_flow_style = False
    y.indent(mapping=2, sequence=4, offset=2)
    y.width = 4096  # never fold a long command or test into two lines
    buf = io.StringIO()
    y.dump(to_yaml_tree(tree), buf)
    return buf.getvalue()
