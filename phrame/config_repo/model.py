"""The loaded repository: documents with their data and where every value came from."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from phrame.config_repo.problems import Problem

PathPart = str | int


@dataclass
class Document:
    """One parsed file. ``data`` is plain JSON-like data; ``tree`` where its values are:
    the marks of ``yaml_events`` (libyaml's reading), or the ruamel node of a file ruamel
    read (``None`` for files parsed without it). Lines and columns are 1-based."""

    file: str
    data: Any
    tree: Any = None
    schema_ok: bool = False
    is_readable: bool = True  # False: a placeholder for a file whose problems are already reported
    content_id: str | None = None  # blob sha when read from git: the key of phrame.config_repo.cache
    # where the schema errors are (set by validate): the semantic rules still read the
    # other parts of a file with a schema error, so one typo does not hide the rest
    unsound: frozenset[tuple[PathPart, ...]] = frozenset({()})
    # (kind, its schema problems) once validate checked it: a document shared with a reading
    # before (the same path and blob) is not looked up again
    checked: tuple[str, tuple[Problem, ...]] | None = field(default=None, repr=False, compare=False)

    @property
    def stem(self) -> str:
        name = self.file.rsplit("/", 1)[-1]
        return name.rsplit(".", 1)[0]

    def is_sound(self, *path: PathPart) -> bool:
        """True when the value at ``path`` passed its schema: no schema error inside it or
        at a value that encloses it (an error at the root makes nothing sound)."""
        if self.schema_ok:
            return True
        if not isinstance(self.data, dict):
            return False
        for bad in self.unsound:
            depth = min(len(bad), len(path))
            if bad[:depth] == path[:depth]:
                return False
        return True

    def position(self, path: Sequence[PathPart], *, key: bool = False) -> tuple[int, int]:
        """Line and column of the value at ``path`` (of its key when ``key``), or of the
        deepest enclosing value that has one."""
        if type(self.tree) is tuple:
            return _marked_position(self.tree, path, key)
        node = self.tree
        line, col = 1, 1
        # a tagged scalar (``!!str 0`` as a whole file) has an ``lc`` without a position
        lc = getattr(node, "lc", None)
        if lc is not None and lc.line is not None:
            line, col = lc.line + 1, (lc.col or 0) + 1
        for i, part in enumerate(path):
            lc = getattr(node, "lc", None)
            if lc is None:
                break
            last = i == len(path) - 1
            try:
                if isinstance(part, int):
                    pos = lc.item(part)
                    child = node[part]
                else:
                    pos = lc.key(part) if (key and last) else lc.value(part)
                    child = node[part]
            except (KeyError, IndexError, TypeError):
                break
            if pos is not None and pos[0] is not None:
                line, col = pos[0] + 1, (pos[1] or 0) + 1
            node = child
        return line, col


def _marked_position(marks: tuple[Any, ...], path: Sequence[PathPart], key: bool) -> tuple[int, int]:
    """``Document.position`` over ``yaml_events`` marks: the same answers as over ruamel's
    tree (a scalar file is at 1:1; a missing part stops at the deepest value found)."""
    line, col = (marks[0] + 1, marks[1] + 1) if len(marks) == 3 else (1, 1)
    node: Any = marks
    for i, part in enumerate(path):
        if len(node) != 3:
            break
        children = node[2]
        if type(children) is list:
            if type(part) is not int or not -len(children) <= part < len(children):
                break
            node = children[part]
            line, col = node[0] + 1, node[1] + 1
            continue
        entry = children.get(part)
        if entry is None:
            break
        node = entry[2]
        at = entry if key and i == len(path) - 1 else node
        line, col = at[0] + 1, at[1] + 1
    return line, col


@dataclass
class Environment:
    name: str
    doc: Document | None = None
    networks: dict[str, Document] = field(default_factory=dict)
    services: dict[str, Document] = field(default_factory=dict)
    placement: Document | None = None  # node.json
    # secrets/<name>.sops.yaml by <name>: SOPS documents, values encrypted (phrame.config_repo.secrets)
    secrets: dict[str, Document] = field(default_factory=dict)

    @property
    def dir(self) -> str:
        return f"environments/{self.name}"

    @property
    def settings(self) -> dict[str, Any]:
        """``environment.yaml`` as read (empty when absent or not a mapping)."""
        doc = self.doc
        return dict(doc.data) if doc is not None and isinstance(doc.data, dict) else {}

    def track(self, default_ref: str) -> str:
        """The ref this environment follows: a branch name (``refs/heads/`` dropped, so
        ``main`` and ``refs/heads/main`` are one branch) or ``refs/tags/<tag>``;
        ``default_ref`` (PHRAME_TRACK_REF) when ``track:`` is absent."""
        track = str(self.settings.get("track") or default_ref)
        return track.removeprefix("refs/heads/")

    @property
    def placement_mode(self) -> str:
        return str(self.settings.get("placement", "auto"))


@dataclass
class ConfigRepo:
    """A whole repository at one commit (``commit`` is ``None`` for a directory)."""

    nodes: dict[str, Document] = field(default_factory=dict)
    environments: dict[str, Environment] = field(default_factory=dict)
    commit: str | None = None
    problems: list[Problem] | None = None  # set by validate(); None = not validated yet
    # (commit, Rendered) that validate's payload check rendered: render() at that commit
    # returns it instead of rendering the whole repository a second time
    rendered: Any = field(default=None, repr=False, compare=False)

    def documents(self) -> list[Document]:
        docs = list(self.nodes.values())
        for env in self.environments.values():
            docs += [d for d in (env.doc, env.placement) if d is not None]
            docs += list(env.networks.values()) + list(env.services.values())
            docs += list(env.secrets.values())
        return docs
