"""Sorting a source's files into the repository layout (docs/config/format.md).

Every file under a known folder must be one the layout names; anything else is reported
(``unknown-file``, which includes a symlink or device where a file belongs: never followed),
as are oversized files and the same name written twice (``x.yaml`` and ``x.yml``). Returns
the model and the problems found while reading; never raises for bad content, only
:class:`ConfigError` when the repository itself cannot be read.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from phrame.config_repo.cache import ReadCache
from phrame.config_repo.model import ConfigRepo, Document, Environment
from phrame.config_repo.problems import Problem
from phrame.config_repo.scalar_checks import printable_path
from phrame.config_repo.sources import MAX_FILE_BYTES, DirectorySource, GitSource, NotAFile, Source
from phrame.config_repo.yaml_reading import parse_json, parse_yaml

YAML_SUFFIXES = (".yaml", ".yml")
# Files people keep beside config in any folder; never read.
DOC_FILES = ("README.md", ".gitkeep", ".gitignore")


def load_directory(root: str | os.PathLike[str]) -> tuple[ConfigRepo, list[Problem]]:
    return load(DirectorySource(root))


def load_git(repo_path: str | os.PathLike[str], ref: str = "HEAD") -> tuple[ConfigRepo, list[Problem]]:
    return load(GitSource(repo_path, ref))


def node_names(root: str | os.PathLike[str], ref: str | None = None) -> list[str]:
    """Names of the inventory's nodes (file stems of ``nodes/*.yaml``), for broker ACLs."""
    repo, _ = load_git(root, ref) if ref else load_directory(root)
    return sorted(repo.nodes)


def secret_file_name(path: str) -> str | None:
    """``db`` for ``.../secrets/db.sops.yaml`` (or ``.sops.yml``); None for any other name."""
    for suffix in YAML_SUFFIXES:
        name = Path(path).name
        if name.endswith(".sops" + suffix) and len(name) > len(".sops" + suffix):
            return name[: -len(".sops" + suffix)]
    return None


def _stem(path: str) -> str | None:
    for suffix in YAML_SUFFIXES:
        if path.endswith(suffix):  # a git path: "/" separates, no "." or ".." part
            return path.rpartition("/")[2][: -len(suffix)]
    return None


class _Reader:
    def __init__(self, source: Source, cache: ReadCache | None) -> None:
        self.source = source
        self.cache = cache
        self.repo = ConfigRepo(commit=source.commit)
        self.problems: list[Problem] = []

    def problem(self, file: str, rule: str, message: str) -> None:
        self.problems.append(Problem(file, 1, 1, rule, message))

    def parse(self, path: str, size: int) -> Document | None:
        if size > MAX_FILE_BYTES:
            self.problem(path, "file-too-large", f"file is {size} bytes; the limit is {MAX_FILE_BYTES}")
            return None
        cid = self.source.content_id(path) if self.cache is not None else None
        key = ("parse", path, cid)
        cached = self.cache.get(key) if self.cache is not None and cid else None
        if cached is None:
            try:
                raw = self.source.read(path)
            except NotAFile as e:
                msg = f"{e.what}; only regular files belong here (links are never followed)"
                self.problem(path, "unknown-file", msg)
                return None
            if len(raw) > MAX_FILE_BYTES:  # grew since it was listed, or its size was unknown
                self.problem(path, "file-too-large", f"file is over {MAX_FILE_BYTES} bytes, the limit")
                return None
            parsed, problems = (parse_json if path.endswith(".json") else parse_yaml)(path, raw)
            made = None if parsed is None else Document(path, parsed.data, parsed.tree, content_id=cid)
            cached = (made, problems)
            if self.cache is not None and cid:
                self.cache.put(key, cached)
        doc, problems = cached
        self.problems += problems
        # one Document per path and blob, shared by the readings that hold it: validation
        # marks it alike each time (its schema's verdict is a function of its content)
        return doc

    def put(self, table: dict[str, Document], path: str, size: int, where: str) -> None:
        stem = _stem(path)
        if stem is None:
            self.problem(path, "unknown-file", f"unknown file in {where}: only <name>.yaml files belong here")
            return
        if stem in table:
            first = table[stem].file
            self.problem(path, "duplicate-name", f"{stem!r} is already defined by {first}")
            return
        doc = self.parse(path, size)
        if doc is not None:
            table[stem] = doc
        else:  # keep the name known so references to it are not reported twice
            table[stem] = Document(path, None, is_readable=False)

    def put_secret(self, env: Environment, path: str, size: int) -> None:
        name = secret_file_name(path)
        if name is None:
            msg = f"unknown file in {env.dir}/secrets/: only <name>.sops.yaml files (SOPS-encrypted) go here"
            self.problem(path, "unknown-file", msg)
            return
        if name in env.secrets:
            self.problem(path, "duplicate-name", f"{name!r} is already defined by {env.secrets[name].file}")
            return
        env.secrets[name] = self.parse(path, size) or Document(path, None, is_readable=False)

    def env(self, name: str) -> Environment:
        return self.repo.environments.setdefault(name, Environment(name))

    def read(self, path: str, size: int) -> None:
        parts = path.split("/")
        if parts[-1] in DOC_FILES or parts[0] not in ("nodes", "environments"):
            return  # root-level files (CI config, docs) are not part of the layout
        shown = printable_path(path)
        if shown is not None:  # never a name, and printed or published as it is it would harm
            msg = "file name is not UTF-8 text or holds a control character; rename it"
            self.problem(shown, "unknown-file", msg)
            return
        if parts[0] == "nodes":
            if len(parts) != 2:
                self.problem(path, "unknown-file", "nodes/ holds only <node>.yaml files, no folders")
            else:
                self.put(self.repo.nodes, path, size, "nodes/")
            return
        if len(parts) < 3:
            self.problem(path, "unknown-file", "environments/ holds only one folder per environment")
            return
        env = self.env(parts[1])
        rest = parts[2:]
        if rest == ["environment.yaml"] or rest == ["environment.yml"]:
            if env.doc is not None:
                self.problem(path, "duplicate-name", f"environment already defined by {env.doc.file}")
            else:
                env.doc = self.parse(path, size) or Document(path, None, is_readable=False)
        elif rest == ["node.json"]:
            env.placement = self.parse(path, size) or Document(path, None, is_readable=False)
        elif len(rest) == 2 and rest[0] == "networks":
            self.put(env.networks, path, size, f"{env.dir}/networks/")
        elif len(rest) == 2 and rest[0] == "services":
            self.put(env.services, path, size, f"{env.dir}/services/")
        elif len(rest) == 2 and rest[0] == "secrets":
            self.put_secret(env, path, size)
        else:
            self.problem(
                path,
                "unknown-file",
                f"unknown file in {env.dir}/: expected environment.yaml, node.json, "
                "networks/<name>.yaml, services/<name>.yaml or secrets/<name>.sops.yaml",
            )


def load(source: Source, *, cache: ReadCache | None = None) -> tuple[ConfigRepo, list[Problem]]:
    """Read every file of ``source``; with ``cache``, files already read (same path and
    blob) are not parsed again, and an environment folder whose files are all the same
    blobs as in a reading before is that reading's :class:`Environment` (nothing mutates
    one after loading; validation marks its documents the same way again)."""
    reader = _Reader(source, cache)
    for group, members in _folders(source.files()).items():
        key = _environment_key(reader, group, members) if group is not None else None
        kept: tuple[Environment | None, list[Problem]] | None = (
            reader.cache.get(key, large=True) if key is not None and reader.cache is not None else None
        )
        if kept is not None:
            env, problems = kept
            if env is not None:
                reader.repo.environments[env.name] = env
            reader.problems += problems
            continue
        start = len(reader.problems)
        for path, size in members:
            reader.read(path, size)
        if key is not None and reader.cache is not None:
            reader.cache.put(
                key, (reader.repo.environments.get(str(group)), reader.problems[start:]), large=True
            )
    for env in reader.repo.environments.values():
        if env.doc is None:
            reader.problem(
                f"{env.dir}/environment.yaml",
                "missing-file",
                f"environment {env.name!r} has no environment.yaml",
            )
    return reader.repo, reader.problems


def _folders(files: Iterable[tuple[str, int]]) -> dict[str | None, list[tuple[str, int]]]:
    """The files of each environment folder (by its name) and the rest (None), each in
    the order listed."""
    out: dict[str | None, list[tuple[str, int]]] = {}
    for path, size in files:
        parts = path.split("/", 2)
        here = parts[1] if len(parts) == 3 and parts[0] == "environments" else None
        out.setdefault(here, []).append((path, size))
    return out


def _environment_key(
    reader: _Reader, group: str, members: list[tuple[str, int]]
) -> tuple[object, ...] | None:
    if reader.cache is None:
        return None
    ids = []
    for path, size in members:
        cid = reader.source.content_id(path)
        if cid is None:
            return None  # a link, a gitlink or a file on disk: read it every time
        ids.append((path, size, cid))
    return ("loaded-environment", group, tuple(ids))
