"""Compose's ``$VAR`` / ``${VAR:-default}`` syntax, read without any environment.

docker-compose fills variables from the shell and ``.env`` when it runs. An import must not
bake the importer's environment into the repo, so here a variable takes its written
default or nothing: :func:`resolve` says which variables had no default, and the caller
decides (an ``env`` value that is one bare variable becomes a secret file reference).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

_NAME = r"[A-Za-z_][A-Za-z0-9_]*"
# $$ | $NAME | ${NAME} | ${NAME<op><arg>}; op :- - :? ? :+ +
_TOKEN = re.compile(r"\$(?:(\$)|(" + _NAME + r")|\{(" + _NAME + r")(?:(:?[-?+])([^}]*))?\})")


class InterpolationError(ValueError):
    """A ``$`` compose itself would refuse (``${`` unclosed, ``${1x}``)."""


@dataclass
class Resolved:
    value: str | None  # None: a variable had no default (see ``missing``)
    missing: list[str] = field(default_factory=list)
    defaults: dict[str, str] = field(default_factory=dict)  # variable -> default used
    bare: str | None = None  # the variable when the text is exactly one, without default

    @property
    def changed(self) -> bool:
        return bool(self.missing or self.defaults)


def resolve(text: str) -> Resolved:
    """``text`` with ``$$`` made ``$`` and every variable replaced by its written default."""
    out: list[str] = []
    result = Resolved(None)
    pos = 0
    refs = 0
    for m in _TOKEN.finditer(text):
        literal = text[pos : m.start()]
        if "$" in literal:
            raise InterpolationError(f"invalid interpolation {literal[literal.index('$') :]!r} in {text!r}")
        out.append(literal)
        pos = m.end()
        if m.group(1):
            out.append("$")
            continue
        refs += 1
        name = m.group(2) or m.group(3)
        op, arg = m.group(4), m.group(5)
        if op in (":-", "-") and "$" not in (arg or ""):
            result.defaults[name] = arg or ""
            out.append(arg or "")
        else:  # no default, a required one (?), or an alternative (+) that depends on it
            result.missing.append(name)
            if op in (None, ":?", "?"):
                result.bare = name
    rest = text[pos:]
    if "$" in rest:
        raise InterpolationError(f"invalid interpolation {rest[rest.index('$') :]!r} in {text!r}")
    out.append(rest)
    whole = len(text) > 0 and refs == 1 and _TOKEN.fullmatch(text) is not None
    if not (whole and result.bare):
        result.bare = None
    result.value = None if result.missing else "".join(out)
    return result


def escape(text: str) -> str:
    """A literal value written into a compose file: compose would expand a single ``$``."""
    return text.replace("$", "$$")
