"""Fuzzing the topic API's kv write route over real uvicorn and mosquitto (hypothesis, under
the fuzz budget).

Hostile bodies (NaN, Infinity, 1e999, lone surrogates, nesting up to past the parser's
limit, bytes that are no JSON) and hostile topics (hundreds of levels, wildcards, odd
characters): never a 5xx and never a 503 (no write may cost the API its broker
connection), a refused write leaves nothing at its topic, and an accepted one reads back
as strict JSON equal to what was sent.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.fuzz.profile import fuzz
from tests.support.mosquitto import Mosquitto
from tests.support.topic_api import ApiStack
from tests.support.waiting import wait_for

pytestmark = [pytest.mark.mqtt]
LEAF = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(10**30), max_value=10**30),
    st.floats(),  # NaN and the infinities too
    st.text(st.characters() | st.characters(categories=["Cs"]), max_size=8),
)
DOC = st.recursive(
    LEAF, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3),
    max_leaves=10,
)  # fmt: skip
DEPTH = st.sampled_from([63, 64, 65, 900, 982, 995, 5000])
BODY = st.one_of(
    DOC.map(lambda d: json.dumps(d).encode()),
    DEPTH.map(lambda n: b"[" * n + b"]" * n),
    DEPTH.map(lambda n: b"[" * n),
    st.sampled_from([b"NaN", b"[1e999]", b'"\\ud800"', b'{"\\udfff": 1}', b"\xed\xa0\x80", b""]),
    st.binary(max_size=64),
)
LEVEL = st.text(st.characters(blacklist_categories=["Cs"], blacklist_characters="/"), min_size=1, max_size=3)
TAIL = st.one_of(
    st.lists(LEVEL, min_size=1, max_size=4).map("/".join),
    st.integers(min_value=190, max_value=260).map(lambda n: "/".join(["x"] * n)),
)


def strict(text: str) -> Any:
    def refuse(name: str) -> None:
        raise AssertionError(f"answer holds {name}: {text[:200]}")

    return json.loads(text, parse_constant=refuse)


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ApiStack]:
    broker = Mosquitto().start()
    s = ApiStack(broker.url, Path(tmp_path_factory.mktemp("kv-fuzz"))).start(mirrors=False)
    try:
        wait_for(lambda: s.get("/readyz").status_code == 200, "the API's broker connection", 15)
        yield s
    finally:
        s.stop()
        broker.stop()


def test_hostile_kv_writes_never_cost_the_connection(stack: ApiStack) -> None:
    counter = itertools.count()
    answers: dict[int, int] = {}
    http = httpx.Client(base_url=stack.url, headers=stack.headers(), timeout=30)

    @settings(fuzz(0.25), deadline=None, suppress_health_check=list(HealthCheck))
    @given(body=BODY, tail=TAIL)
    def check(body: bytes, tail: str) -> None:
        topic = f"phrame/kv/f{next(counter)}/{tail}"
        path = "/api/kv/" + quote(topic, safe="/")
        answer = http.put(path, content=body)
        assert answer.status_code < 500, (topic[:80], body[:80], answer.text)
        error_or_value = strict(answer.text)
        answers[answer.status_code] = answers.get(answer.status_code, 0) + 1
        read = http.get(path)
        if answer.status_code == 200:
            assert read.status_code == 200, read.text
            assert strict(read.text)["payload"] == json.loads(body), (body[:80], read.text[:200])
        else:
            assert "error" in error_or_value and read.status_code in (400, 404), read.text[:200]

    try:
        check()
    finally:
        http.close()
    assert {200, 400} <= set(answers), answers  # both sides of the rules were reached
    assert stack.get("/readyz").status_code == 200
