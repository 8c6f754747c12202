"""Properties of phrame.config_repo over generated valid repositories (benchmarks/repo_gen.py):
they validate clean, every rendered payload fits its schema, and the rendered topics do
not depend on the order a source yields files in nor on key order inside the files."""

from __future__ import annotations

import json
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from phrame.config_repo import load, load_directory, render, validate
from phrame.config_repo.sources import DirectorySource
from schemas import Topics, check_payload, digest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
if str(BENCHMARKS) not in sys.path:
    sys.path.insert(0, str(BENCHMARKS))

from repo_gen import write_repo  # noqa: E402  (benchmarks/ is not a package)

SETTINGS = settings(max_examples=25, deadline=None)
sizes = st.fixed_dictionaries(
    {
        "nodes": st.integers(min_value=1, max_value=6),
        "services": st.integers(min_value=0, max_value=30),
        "seed": st.integers(min_value=0, max_value=2**32 - 1),
    }
)


class OrderedSource:
    """A directory whose files are yielded in the order given (the ``Source`` seam)."""

    def __init__(self, root: Path, order: list[tuple[str, int]]) -> None:
        self._dir = DirectorySource(root)
        self.commit: str | None = None
        self._order = order

    def files(self) -> Iterator[tuple[str, int]]:
        yield from self._order

    def read(self, path: str) -> bytes:
        return self._dir.read(path)


def rendered_bytes(topics: dict[str, Any]) -> str:
    return json.dumps(topics, sort_keys=True)


@SETTINGS
@given(size=sizes)
def test_generated_repos_validate_and_render_to_schema_valid_payloads(size: dict[str, int]) -> None:
    with tempfile.TemporaryDirectory() as root:
        write_repo(root, **size)
        repo, read_problems = load_directory(root)
        assert [p.format() for p in validate(repo, read_problems)] == []
        rendered = render(repo)
        assert rendered.unassigned == []
        topics = rendered.topics()
    layout = Topics()
    manifests: dict[str, dict[str, str]] = {}
    items: dict[str, dict[str, str]] = {}
    for topic, payload in topics.items():
        parsed = layout.parse(topic)
        check_payload(parsed.schema_name, payload)
        if parsed.kind == "manifest":
            manifests[str(parsed.node)] = payload["items"]
        elif parsed.node is not None:
            spec = {k: v for k, v in payload.items() if k not in ("digest", "commit")}
            assert payload["digest"] == digest(spec)
            key = f"{parsed.kind}/{parsed.item_id}"
            items.setdefault(parsed.node, {})[key] = payload["digest"]
    # every inventory node has a manifest, listing exactly its items and their digests
    assert sorted(manifests) == sorted(repo.nodes)
    assert {n: m for n, m in manifests.items() if m} == items


@SETTINGS
@given(size=sizes, data=st.data())
def test_render_does_not_depend_on_file_order(size: dict[str, int], data: st.DataObject) -> None:
    with tempfile.TemporaryDirectory() as root:
        write_repo(root, **size)
        repo, read_problems = load_directory(root)
        assert validate(repo, read_problems) == []
        expected = rendered_bytes(render(repo).topics())
        files = list(DirectorySource(root).files())
        order = data.draw(st.permutations(files), label="file order")
        shuffled, shuffled_problems = load(OrderedSource(Path(root), order))
    assert validate(shuffled, shuffled_problems) == []
    assert rendered_bytes(render(shuffled).topics()) == expected


@SETTINGS
@given(size=sizes, key_seed=st.integers(min_value=0, max_value=2**32 - 1))
def test_render_does_not_depend_on_key_order(size: dict[str, int], key_seed: int) -> None:
    with tempfile.TemporaryDirectory() as plain, tempfile.TemporaryDirectory() as reordered:
        write_repo(plain, **size)
        write_repo(reordered, **size, key_seed=key_seed)
        repo_a, problems_a = load_directory(plain)
        repo_b, problems_b = load_directory(reordered)
    assert validate(repo_a, problems_a) == []
    assert validate(repo_b, problems_b) == []
    assert rendered_bytes(render(repo_b).topics()) == rendered_bytes(render(repo_a).topics())
