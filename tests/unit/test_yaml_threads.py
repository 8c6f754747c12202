"""Parsing is safe from several threads at once (config-sync parses in one worker per ref)."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from phrame.config_repo.yaml_reading import parse_yaml, plain

SAMPLE = Path(__file__).resolve().parents[2] / "fixtures" / "phrame-config"


def test_parallel_parses_read_what_one_thread_reads() -> None:
    files = sorted(SAMPLE.rglob("*.yaml"))
    raw = [(str(f.relative_to(SAMPLE)), f.read_bytes()) for f in files]

    def read(item: tuple[str, bytes]) -> tuple[object, list[str]]:
        doc, problems = parse_yaml(*item)
        return (plain(doc.data) if doc else None), [p.message for p in problems]

    expected = [read(item) for item in raw]
    with ThreadPoolExecutor(8) as pool:
        for _round in range(20):
            assert list(pool.map(read, raw)) == expected
