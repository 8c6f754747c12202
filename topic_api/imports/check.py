"""Validation of a compose import before any branch is written, as ``phrame validate`` would.

Called by the import targets. :class:`OverlaySource` is a ``phrame.config_repo`` source: the
tracked head's files (or none) with the imported files laid over them, read without a
checkout. Only problems the import brings are refused: those of the head alone are
counted, not blamed on it. Pure apart from reading the base source; never writes.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from phrame.config_repo import Problem, load, validate
from phrame.config_repo.sources import MAX_FILE_BYTES, Source

# rules that need files an import does not carry (nodes/): unknowable for the files alone
NEEDS_THE_REPO = frozenset({"unknown-node", "cordoned-node", "capacity-exceeded"})


class OverlaySource:
    """``base``'s files (None: no files) with ``files`` (path → text) replacing or adding."""

    def __init__(self, base: Source | None, files: Mapping[str, str]) -> None:
        self.base = base
        self.files_over = {p: t.encode("utf-8", "surrogatepass") for p, t in files.items()}
        self.commit: str | None = None

    def files(self) -> Iterator[tuple[str, int]]:
        sizes = dict(self.base.files()) if self.base is not None else {}
        sizes.update({p: len(b) for p, b in self.files_over.items()})
        yield from sorted(sizes.items())

    def read(self, path: str) -> bytes:
        if path in self.files_over:
            return self.files_over[path][: MAX_FILE_BYTES + 1]
        assert self.base is not None  # files() listed nothing else
        return self.base.read(path)

    def content_id(self, path: str) -> str | None:
        return None


def _key(p: Problem) -> tuple[str, str, str]:
    return (p.file, p.rule, p.message)  # lines move when a file changes; the problem does not


def problems_on(base: Source, files: Mapping[str, str]) -> tuple[list[Problem], list[Problem]]:
    """(problems the files bring to ``base``, problems ``base`` has on its own)."""
    before = validate(*load(base))
    after = validate(*load(OverlaySource(base, files)))
    known = {_key(p) for p in before}
    return [p for p in after if _key(p) not in known or p.file in files], before


def problems_alone(files: Mapping[str, str]) -> list[Problem]:
    """The problems of ``files`` in a repository holding nothing else, except the rules that
    need the rest of the repository (a pinned node is in ``nodes/``, not in the import)."""
    found = validate(*load(OverlaySource(None, files)))
    return [p for p in found if p.rule not in NEEDS_THE_REPO]
