"""The YAML reader: libyaml reads, YAML 1.2 core scalars, ruamel only where it must.

Cases where the libyaml reader could differ from the ruamel one it replaced (tabs, merges,
tags, several documents, empty files, CRLF, flow style, long lines, YAML 1.1 spellings),
each pinned to what ruamel's reading gave; and that an ordinary file never reaches ruamel.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from phrame.config_repo import yaml_reading
from phrame.config_repo.yaml_reading import MAX_DEPTH, parse_yaml
from tests.unit.test_validate_limits import BASE, problems_of, service


def read(text: str) -> Any:
    doc, problems = parse_yaml("f.yaml", text.encode())
    assert doc is not None and problems == [], problems
    return doc.data


def refused(text: str) -> list[str]:
    doc, problems = parse_yaml("f.yaml", text.encode())
    assert doc is None
    return [p.format() for p in problems]


def test_libyaml_c_parser_is_present() -> None:
    assert yaml.__with_libyaml__ and yaml.CSafeLoader is not None


def test_an_ordinary_file_never_reaches_ruamel(monkeypatch: pytest.MonkeyPatch) -> None:
    def ruamel(*_: Any) -> Any:
        raise AssertionError("read by ruamel")

    monkeypatch.setattr(yaml_reading, "parse_ruamel", ruamel)
    text = 'name: web\nimage: "x:1"\nenv:\n  A: "1"\n  B: 2\nports: [80, "81:81"]\ncmd: |\n  run\n'
    assert read(text) == {
        "name": "web",
        "image": "x:1",
        "env": {"A": "1", "B": 2},
        "ports": [80, "81:81"],
        "cmd": "run\n",
    }


@pytest.mark.parametrize(
    ("written", "value"),
    [
        # YAML 1.1 (PyYAML's resolver) reads these as booleans; 1.2 core as text
        *[(w, w) for w in ("yes", "no", "on", "off", "y", "n", "Yes", "NO", "On", "OFF")],
        ("1:20", "1:20"),  # 1.1: sexagesimal 80
        ("12:30", "12:30"),
        ("0755", 755),  # 1.1: octal 493; 1.2 core: decimal
        ("0o17", 15),
        ("0x1F", 31),
        ("0b1", 1),  # ruamel's 1.2 reading keeps binary and digit separators
        ("1_000", 1000),
        (".inf", "inf"),  # no JSON number: kept as text so the schema names the error
        ("-.inf", "-inf"),
        (".nan", "nan"),
        ("=", "="),  # 1.1: the value key
        ("true", True),
        ("True", True),
        ("TRUE", True),
        ("tRue", "tRue"),
        ("false", False),
        ("null", None),
        ("Null", None),
        ("~", None),
        ("", None),
        ("nULL", "nULL"),
        ("1e3", 1000.0),
        ("1.5", 1.5),
        ("1.", 1.0),
        (".5", 0.5),
        ("6.0", 6.0),
        ("-0", 0),
        ("+5", 5),
        ("1e", "1e"),
        ("1.2.3", "1.2.3"),
        ("2020-01-02", "2020-01-02"),
        ("2020-1-2", "2020-1-2"),
        ("2001-12-14t21:59:43.10-05:00", "2001-12-14T21:59:43.100000-05:00"),
    ],
)
def test_plain_scalars_are_yaml_1_2_core(written: str, value: Any) -> None:
    got = read(f"a: {written}\n")["a"]
    assert got == value and type(got) is type(value)


def test_quoted_block_and_str_tagged_scalars_are_text() -> None:
    text = "a: \"yes\"\nb: 'true'\nc: !!str 0\nd: |\n  on\ne: >\n  folded\n  text\n"
    assert read(text) == {"a": "yes", "b": "true", "c": "0", "d": "on\n", "e": "folded text\n"}


def test_merge_keys_tags_and_anchors_read_as_before() -> None:
    assert read("base: &b {x: 1, y: 2}\nc:\n  <<: *b\n  y: 3\n") == {
        "base": {"x": 1, "y": 2},
        "c": {"y": 3, "x": 1},
    }
    assert read("a: &a {x: 1}\nb: &b {z: 2}\nc:\n  <<: [*a, *b]\n")["c"] == {"x": 1, "z": 2}
    assert read("a: !foo bar\nb: !foo {x: 1}\n") == {"a": "bar", "b": {"x": 1}}
    assert read("a: !!binary aGVsbG8=\n") == {"a": "b'hello'"}
    data = read("a: &x [1, 2]\nb: *x\nc: &s hi\nd: *s\ne: &s again\nf: *s\n")
    assert data == {"a": [1, 2], "b": [1, 2], "c": "hi", "d": "hi", "e": "again", "f": "again"}
    assert data["a"] is not data["b"]  # copied, as before: nothing shares a list


def test_a_collection_tagged_as_the_other_kind_is_refused() -> None:
    assert refused("a: !!map []\n") == [
        "f.yaml:1:4: yaml-syntax: expected a mapping node, but found sequence"
    ]
    assert refused("[!!seq {}]\n") == ["f.yaml:1:2: yaml-syntax: expected a sequence node, but found mapping"]


def test_merge_of_a_scalar_is_refused_at_its_place() -> None:
    (p,) = refused("a: &a 1\nc:\n  <<: *a\n")
    assert p.startswith("f.yaml:1:4: yaml-syntax: expected a mapping or list of mappings for merging")


def test_empty_comment_only_and_bare_document_files_are_null() -> None:
    for text in ("", "# only a comment\n", "---\n", "\n\n"):
        doc, problems = parse_yaml("f.yaml", text.encode())
        assert doc is not None and doc.data is None and problems == []


def test_several_documents_are_refused() -> None:
    assert refused("a: 1\n---\nb: 2\n") == [
        "f.yaml:2:1: yaml-syntax: but found another document "
        "(expected a single document in the stream started at line 1, column 1)"
    ]


def test_crlf_flow_and_long_lines() -> None:
    assert read("a: 1\r\nb:\r\n  - x\r\n  - y\r\n") == {"a": 1, "b": ["x", "y"]}
    assert read("{a: [1, 2, {b: c}], d: e}\n") == {"a": [1, 2, {"b": "c"}], "d": "e"}
    assert read("a: " + "x" * 200_000 + "\n") == {"a": "x" * 200_000}


def test_tab_after_a_value_is_refused_as_before() -> None:
    # libyaml takes these; the reader kept ruamel's refusal (a tab sends the file to ruamel)
    assert refused("a:\tb\n") == [
        "f.yaml:1:3: yaml-syntax: found character '\\t' that cannot start any token"
    ]
    assert read('a: "x\\ty"\nb: |\n  c\td\n') == {"a": "x\ty", "b": "c\td\n"}


def test_non_text_keys_are_schema_errors_at_the_key() -> None:
    doc, problems = parse_yaml("f.yaml", b"a: 1\ntrue: 2\n3: 4\n")
    assert doc is not None and doc.data == {"a": 1, "True": 2, "3": 4}
    assert sorted((p.line, p.column, p.rule) for p in problems) == [(2, 1, "schema"), (3, 1, "schema")]


@pytest.mark.parametrize("depth", [MAX_DEPTH - 2, MAX_DEPTH - 1, MAX_DEPTH, MAX_DEPTH + 1, 100_000])
def test_nesting_near_and_far_past_the_limit(depth: int) -> None:
    doc, problems = parse_yaml("f.yaml", ("[" * depth + "]" * depth).encode())
    if depth <= MAX_DEPTH:
        assert doc is not None and problems == []
    else:  # no crash of a C stack: a problem at the bracket past the limit
        assert doc is None and [(p.rule, p.line, p.column) for p in problems] == [
            ("yaml-syntax", 1, MAX_DEPTH + 1)
        ]


def test_a_yaml_directive_does_not_change_the_next_files() -> None:
    assert read("%YAML 1.1\n---\na: y\n") == {"a": True}  # that file asked for YAML 1.1
    assert read("a: y\nb: 0x10\n") == {"a": "y", "b": 16}  # hex: read by ruamel, the same parser


def test_an_empty_value_is_placed_on_its_own_line() -> None:
    doc, _ = parse_yaml("f.yaml", b"a:\nb: 1\n")
    assert doc is not None and doc.position(["a"]) == (1, 3)  # ruamel placed it at b (2:1)


def test_a_boolean_field_given_yes_says_use_true(tmp_path: Path) -> None:
    (p,) = problems_of(tmp_path, {"nodes/n1.yaml": BASE["nodes/n1.yaml"] + "cordoned: yes\n"})
    assert (p.rule, p.line, p.column) == ("schema", 4, 11)
    assert p.message.startswith("'yes' is not of type 'boolean'") and "use true" in p.message


def test_a_text_field_given_on_says_it_is_text(tmp_path: Path) -> None:
    (p,) = problems_of(tmp_path, service("web", "pull: on"))
    assert p.message.startswith("'on' is not one of ['missing', 'always']")
    assert "YAML 1.2" in p.message and "text" in p.message


# found by fuzzing: ruamel's parser, kept per thread, was left mid-document by this refusal
POISON = (
    '- ports\n- {}\n-\n  -\n    -\n      - !!merge "\\u00f9s"\n  - {}\n  - !!pairs [[test]]\n  -\n'
    '    coDAc-_: !@@DTe\n    !!set {a}: {}\n    kind:\n      - "[\\U00095e0c"\n    depends_on:\n'
    "      - cordoned\n-\n  - !!omap []\n  -\n    volumes: {}\n  - !!float abc\n"
)


def test_a_refused_file_leaves_nothing_behind_for_the_next() -> None:
    doc, problems = parse_yaml("bad.yaml", POISON.encode())
    assert doc is None and problems
    assert read("a: 0x10\nb: [1]\n") == {"a": 16, "b": [1]}  # hex: read by ruamel too


def test_an_anchored_boolean_stays_a_boolean() -> None:
    # ruamel's round-trip reading made it its int subclass, and plain() then 1
    for text in ("a: &c true\nb: *c\n", "a: &c true\nb: *c\nc: 0x1\n"):  # libyaml's reading, ruamel's
        data = read(text)
        assert data["a"] is True and data["b"] is True


@pytest.mark.parametrize(
    "text",
    [
        "[" + ",".join(["{}"] * 20_005) + "]\n",
        "- a\n" * 19_999 + "- - x\n",
        "".join(f"k{i}: v\n" for i in range(10_001)),
    ],
    ids=["flow-maps", "block-list", "keys"],
)
def test_too_many_values_are_refused_without_reading_twice(
    monkeypatch: pytest.MonkeyPatch, text: str
) -> None:
    from phrame.config_repo.yaml_ruamel import parse_ruamel

    expected = parse_ruamel("f.yaml", text)[1]  # ruamel's refusal: the rule, words and place
    monkeypatch.setattr(yaml_reading, "parse_ruamel", lambda *_: pytest.fail("read twice"))
    doc, problems = parse_yaml("f.yaml", text.encode())
    assert doc is None and problems == expected and expected[0].rule == "file-too-large"


@pytest.mark.parametrize(
    "text",
    [
        "[&a !!str {? name : *a}, *a, !!int {? node : x}]\n",
        "[[[], x, !!int {? node : y}], &a !!str {? name : *a}]\n",
    ],
)
def test_a_refused_file_leaves_no_generator_to_raise_in_the_collector(text: str) -> None:
    """ruamel's generator for an unknown tag (``!!str`` on a mapping) catches everything at
    its yield and raises: left suspended by a later error, it raised again when collected,
    on whatever thread collected (found by fuzzing). The reader closes it itself."""
    import gc
    import sys

    seen: list[object] = []
    hook, sys.unraisablehook = sys.unraisablehook, seen.append
    try:
        assert refused(text)
        gc.collect()
    finally:
        sys.unraisablehook = hook
    assert seen == []
