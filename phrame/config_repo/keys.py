"""What a reading's parts are made of, by file path and blob: the keys under which the read
cache keeps what the rules and the renderer make of an environment (and the inventory)."""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable
from typing import Any, TypeVar

from phrame.config_repo.cache import ReadCache
from phrame.config_repo.model import ConfigRepo, Document, Environment

T = TypeVar("T")


def _documents_key(docs: Iterable[Document]) -> tuple[tuple[str, str], ...] | None:
    """The files and blobs of ``docs``; None when one has no content id (not from git, or
    unreadable): nothing is kept then."""
    out = []
    for doc in docs:
        if doc.content_id is None:
            return None
        out.append((doc.file, doc.content_id))
    return tuple(out)


def environment_key(env: Environment) -> tuple[Any, ...] | None:
    """Every file of ``env`` by path and blob (None: not all from git)."""
    docs = [d for d in (env.doc, env.placement) if d is not None]
    key = _documents_key([*docs, *env.networks.values(), *env.services.values(), *env.secrets.values()])
    return None if key is None else (env.name, env.doc is not None, env.placement is not None, key)


def inventory_key(repo: ConfigRepo) -> tuple[tuple[str, str], ...] | None:
    """Every node file by path and blob (None: not all from git)."""
    return _documents_key(repo.nodes.values())


def per_environment(
    cache: ReadCache | None,
    kind: str,
    repo: ConfigRepo,
    env: Environment,
    make: Callable[[Environment], T],
    *extra: Hashable,
) -> T:
    """``make(env)``, kept in ``cache`` as ``kind`` by the paths and blobs of the
    environment's files and the inventory's (and ``extra``): what the rules and the renderer
    make of an environment is a function of those files alone. Made each time without a
    cache, or when a file has no content id."""
    nodes = inventory_key(repo) if cache is not None else None
    key = environment_key(env) if nodes is not None else None
    if cache is None or key is None:
        return make(env)
    cache_key = (kind, nodes, key, *extra)
    made: T | None = cache.get(cache_key, large=True)
    if made is None:
        made = make(env)
        cache.put(cache_key, made, large=True)
    return made


def per_service(
    cache: ReadCache | None,
    kind: str,
    context: Hashable | None,
    env: Environment,
    make: Callable[[set[str]], dict[str, T]],
) -> dict[str, T]:
    """Per service of ``env`` (by name), what ``make(names)`` makes of the services
    ``names``: kept in ``cache`` as ``kind`` by each service file's path and blob while
    ``context`` (everything else it is made of) is unchanged, so only the services whose
    files changed are made again. Only this reading's services stay kept. Made for every
    service without a cache or a context (a file without a content id)."""
    kept: dict[tuple[str, str], T] = {}
    if cache is not None and context is not None:
        kept = cache.get((kind, context), large=True) or {}
    made: dict[str, T] = {}
    missing = set()
    for name, doc in env.services.items():
        found = kept.get((doc.file, doc.content_id)) if doc.content_id is not None else None
        if found is None:
            missing.add(name)
        else:
            made[name] = found
    if missing:
        made.update(make(missing))
    if cache is not None and context is not None:
        now = {(d.file, d.content_id): made[n] for n, d in env.services.items() if d.content_id is not None}
        cache.put((kind, context), now, large=True)
    return made
