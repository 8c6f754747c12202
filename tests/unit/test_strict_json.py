"""schemas.load_json, the one reader of outside JSON: strict (no NaN or Infinity, no number
too large for a float, no lone surrogate, at most MAX_JSON_DEPTH levels of nesting), and
every refusal a ValueError that says what is wrong."""

from __future__ import annotations

import gc

import pytest

from schemas import MAX_JSON_DEPTH, load_json


@pytest.mark.parametrize(
    ("raw", "said"),
    [
        (b"NaN", "NaN"),
        (b'{"ts": NaN}', "NaN"),
        (b"[Infinity]", "Infinity"),
        (b'{"a": -Infinity}', "-Infinity"),
        (b"[1e999]", "too large"),
        (b"-1e999", "too large"),
        (b"1" + b"0" * 400 + b".0", "too large"),
        (b"[" + b"9" * 250 + b"e99]", "too large"),
        (b"[1E+999]", "too large"),
        (b'"\\ud800"', "lone surrogate"),
        (b'{"\\udfff": 1}', "lone surrogate"),
        (b'["ok", {"k": "x\\uDBFFy"}]', "lone surrogate"),
        (b"[" * 995, "nested too deeply"),
        (b"[" * 982 + b"]" * 982, "nested too deeply"),
        (b"[" * 50_000, "nested too deeply"),
        (b"{}" + b"[" * 100, "Extra data"),
    ],
)
def test_refused(raw: bytes, said: str) -> None:
    # the deep cases parse at the recursion limit: a collection there would finalize other
    # tests' garbage (a client's socket, a generator) at that depth, where its finalizer fails
    # and pytest reports it as this test's ("unraisable exception"); none runs during it
    gc.collect()
    gc.disable()
    try:
        with pytest.raises(ValueError, match=said):
            load_json(raw)
    finally:
        gc.enable()


def test_nesting_up_to_the_limit_is_read_and_one_more_is_refused() -> None:
    def nested(depth: int) -> bytes:
        return b'{"a":' * (depth - 1) + b"[1]" + b"}" * (depth - 1)

    assert load_json(nested(MAX_JSON_DEPTH)) is not None
    with pytest.raises(ValueError, match=f"more than {MAX_JSON_DEPTH} levels"):
        load_json(nested(MAX_JSON_DEPTH + 1))
    # many brackets side by side are not depth
    assert len(load_json(b"[" + b",".join([b"[[1]]"] * 500) + b"]")) == 500
    assert load_json(nested(MAX_JSON_DEPTH + 5), max_depth=MAX_JSON_DEPTH + 5) is not None


def test_valid_json_reads_as_before() -> None:
    assert load_json(b'{"a": [1, 2.5, -0.0, 1e308, "\\ud83d\\ude00", null, true]}') == {
        "a": [1, 2.5, -0.0, 1e308, "\U0001f600", None, True]
    }
    assert load_json('"text"') == "text"
    assert load_json(b'"[not nested]"') == "[not nested]"
