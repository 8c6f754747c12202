"""What a careless or hostile commit can write that the schemas alone do not catch: integers
too long to convert, strings UTF-8 cannot encode or that carry control characters, and keys
that are not text. Each must be a problem with file:line (never a traceback), and whatever
validates must render and encode."""

from __future__ import annotations

import json
import os
from pathlib import Path

import git
import pytest

from phrame.cli import main
from phrame.config_repo import Problem, load_directory, load_git, render, validate
from phrame.config_repo.problems import MAX_MESSAGE_CHARS
from phrame.config_repo.scalar_checks import MAX_INT_DIGITS
from schemas import canonical_json
from tests.unit.test_validate_limits import problems_of, service

WEB = "environments/lab/services/web.yaml"
NODE_JSON = "environments/lab/node.json"
BIG = "9" * 5000
HEX = "0x" + "f" * 5000  # converts (base 16 has no limit) but has 6,021 decimal digits


def where(problems: list[Problem]) -> list[tuple[str, str, int, int]]:
    return [(p.file, p.rule, p.line, p.column) for p in problems]


def placement(**assignments: object) -> str:
    doc = {"schema": "phrame.placement/v1", "environment": "lab", "assignments": assignments}
    return json.dumps(doc)


# -- integers past Python's int/str conversion limit ---------------------


@pytest.mark.parametrize(
    ("lines", "line", "column"),
    [
        (["replicas: " + BIG], 5, 11),
        (["replicas: " + HEX], 5, 11),
        (["replicas: -" + BIG], 5, 11),
        (["resources:", "  cpus: " + BIG], 6, 9),
        (["ports:", "  - " + BIG], 6, 5),
        (["env:", "  X: " + BIG], 6, 6),
        (["env:", "  X: " + HEX], 6, 6),
        (["labels:", "  x: " + BIG], 6, 6),
        (["labels:", "  ? " + BIG, "  : x"], 6, 5),  # an explicit key can be that long
    ],
    ids=["replicas", "replicas-hex", "negative", "cpus", "ports", "env", "env-hex", "label", "key"],
)
def test_huge_integer_is_a_problem_at_its_place(
    tmp_path: Path, lines: list[str], line: int, column: int
) -> None:
    (p,) = problems_of(tmp_path, service("web", *lines))
    assert where([p]) == [(WEB, "yaml-syntax", line, column)]
    assert f"at most {MAX_INT_DIGITS} digits" in p.message and "quote it" in p.message


def test_huge_integer_in_node_json_is_a_problem_at_its_place(tmp_path: Path) -> None:
    text = '{"schema": "phrame.placement/v1", "environment": "lab",\n "assignments": {"web": [' + BIG + "]}}"
    (p,) = problems_of(tmp_path, {NODE_JSON: text})
    assert where([p]) == [(NODE_JSON, "json-syntax", 2, 26)]
    assert f"at most {MAX_INT_DIGITS} digits" in p.message


def test_validate_prints_the_problem_and_no_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "repo"
    for name, text in {
        "nodes/n1.yaml": "name: n1\n",
        "environments/lab/environment.yaml": "name: lab\n",
        WEB: f"name: web\nimage: x:1\nreplicas: {HEX}\n",
    }.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    assert main(["validate", str(root)]) == 1
    captured = capsys.readouterr()
    assert captured.out.startswith(f"{WEB}:3:11: yaml-syntax: integer of 5000 hexadecimal digits")
    assert "Traceback" not in captured.err


def test_integers_up_to_the_limit_are_read_and_rendered(tmp_path: Path) -> None:
    longest = "7" * MAX_INT_DIGITS
    hex_longest = "0x" + "f" * 500  # 603 decimal digits
    assert (
        problems_of(tmp_path / "ok", service("web", "env:", f"  X: {longest}", f"  Y: {hex_longest}")) == []
    )
    (p,) = problems_of(tmp_path / "over", service("web", "env:", f"  X: {longest}7"))
    assert p.rule == "yaml-syntax"
    (p,) = problems_of(tmp_path / "hex-over", service("web", "env:", "  X: 0x" + "f" * 540))
    assert (p.rule, p.line, p.column) == ("yaml-syntax", 6, 6)


@pytest.mark.parametrize(
    ("value", "shown", "kind"),
    [
        ("9999-99-99", "9999-99-99", "date or time"),
        ("2024-02-30", "2024-02-30", "date or time"),
        ("2024-01-01 25:00:00", "2024-01-01 25:00:00", "date or time"),
        ("0x_", "0x_", "integer"),
        ("!!int abc", "abc", "integer"),
        ("!!int ''", "", "integer"),
        ("!!float abc", "abc", "number"),
        ("!!bool maybe", "maybe", "boolean"),
    ],
)
def test_a_scalar_that_is_not_what_it_looks_like_is_a_problem_at_its_place(
    tmp_path: Path, value: str, shown: str, kind: str
) -> None:
    (p,) = problems_of(tmp_path, service("web", "env:", f"  WHEN: {value}"))
    assert where([p]) == [(WEB, "yaml-syntax", 6, 9)]
    assert f"{shown!r} is no valid {kind}" in p.message and "quote it" in p.message


def test_an_escape_beyond_unicode_is_a_problem_on_its_line(tmp_path: Path) -> None:
    (p,) = problems_of(tmp_path, service("web", "labels:", '  x: "\\U00110000"'))
    assert (p.file, p.rule, p.line) == (WEB, "yaml-syntax", 6)
    assert "chr() arg not in range" in p.message


# -- strings render cannot encode, and control characters (items 5 and 16) -------------------


@pytest.mark.parametrize(
    ("lines", "line", "column"),
    [
        (['description: "\\ud800"'], 5, 14),
        (["env:", '  X: "a\\udfffb"'], 6, 6),
        (["labels:", '  tier: "\\ud83d\\ude00"'], 6, 9),  # a pair written as two escapes
        (["labels:", '  "a\\ud800": x'], 6, 3),
        (["command:", "  - run", '  - "\\udc00"'], 7, 5),
    ],
    ids=["description", "env", "escaped-pair", "key", "command"],
)
def test_lone_surrogate_is_an_encoding_problem(
    tmp_path: Path, lines: list[str], line: int, column: int
) -> None:
    found = problems_of(tmp_path, service("web", *lines))
    assert (WEB, "yaml-encoding", line, column) in where(found)
    p = next(p for p in found if p.rule == "yaml-encoding")
    assert "UTF-8 cannot encode" in p.message
    assert p.message.isascii() or "\ud800" not in p.message  # printable as it is
    p.format().encode("utf-8")


def test_lone_surrogate_in_node_json_is_an_encoding_problem(tmp_path: Path) -> None:
    text = placement(web=["n1"])[:-1] + ',\n "reasons": {"web": "chosen \\ud800"}}'
    files = {NODE_JSON: text, **service("web", "placement:", "  labels: {role: edge}")}
    files[WEB] = files[WEB].replace("placement:\n  node: n1\n", "", 1)
    (p,) = problems_of(tmp_path, files)
    assert where([p]) == [(NODE_JSON, "yaml-encoding", 2, 21)]


@pytest.mark.parametrize(
    ("lines", "line", "column", "char"),
    [
        (['description: "a\\0b"'], 5, 14, "U+0000"),
        (['description: "\\e[2J"'], 5, 14, "U+001B"),
        (["env:", '  X: "\\x7f"'], 6, 6, "U+007F"),
        (["labels:", '  x: "\\x9b1m"'], 6, 6, "U+009B"),
        (["command:", '  - "a\\0"'], 6, 5, "U+0000"),
        (["env:", '  "A\\eB": x'], 6, 3, "U+001B"),
    ],
    ids=["nul", "esc", "del", "c1-csi", "command", "key"],
)
def test_escaped_control_character_is_refused(
    tmp_path: Path, lines: list[str], line: int, column: int, char: str
) -> None:
    found = problems_of(tmp_path, service("web", *lines))
    assert (WEB, "yaml-syntax", line, column) in where(found)
    p = next(p for p in found if p.rule == "yaml-syntax")
    assert char in p.message and "control character" in p.message


def test_control_character_in_node_json_is_refused(tmp_path: Path) -> None:
    text = placement()[:-1] + ', "reasons": {"web": "\\u001b[31m"}}'
    (p,) = problems_of(tmp_path, {NODE_JSON: text})
    assert (p.file, p.rule, p.line) == (NODE_JSON, "json-syntax", 1)
    assert "U+001B" in p.message


def test_tabs_and_line_breaks_in_text_are_fine(tmp_path: Path) -> None:
    lines = ['description: "one\\ttwo\\r\\nthree"', "env:", "  SCRIPT: |", "    a\tb", "    c"]
    assert problems_of(tmp_path, service("web", *lines)) == []


# -- keys that are not text (item 14) ----------------------------------------------------------


@pytest.mark.parametrize(
    ("lines", "shown"),
    [
        (["labels:", "  true: x", "  'True': y"], "true"),
        (["labels:", "  1: a", "  '1': b"], "1"),
        (["env:", "  True: a", "  'True': b"], "true"),
        (["labels:", "  null: a"], "null"),
        (["labels:", "  1.5: a"], "1.5"),
        (["labels:", "  2024-01-01: a"], "2024-01-01"),
        (["placement:", "  labels:", "    8: x"], "8"),
    ],
    ids=["bool", "int", "env-bool", "null", "float", "date", "placement-labels"],
)
def test_key_that_is_not_text_is_refused_at_the_key(tmp_path: Path, lines: list[str], shown: str) -> None:
    if lines[0] == "placement:":  # replaces the pin
        files = service("web", *lines)
        files[WEB] = files[WEB].replace("placement:\n  node: n1\n", "", 1)
    else:
        files = service("web", *lines)
    found = [p for p in problems_of(tmp_path, files) if "not text" in p.message]
    first_key = len(files[WEB].splitlines()) - len(lines) + 2  # the line after the mapping's key
    if lines[0] == "placement:":
        first_key += 1
    assert len(found) == 1, found
    (p,) = found
    assert (p.file, p.rule, p.line) == (WEB, "schema", first_key)
    assert f"key {shown} " in p.message and "quote it" in p.message


def test_quoted_keys_that_look_like_other_types_are_fine(tmp_path: Path) -> None:
    lines = ["labels:", "  'true': x", "  '1': y", "  'null': z"]
    assert problems_of(tmp_path, service("web", *lines)) == []


# -- whatever validates renders, and encodes -----------------------------------------------------


def test_a_valid_repo_with_odd_but_legal_text_renders_and_encodes(tmp_path: Path) -> None:
    lines = [
        'description: "caf\\u00e9 \\U0001F600 \\u2028"',
        "env:",
        "  X: " + "1" * MAX_INT_DIGITS,
        '  Y: "\\t"',
        "labels:",
        "  tier: 0x1F",
    ]
    problems_of(tmp_path, service("web", *lines))
    repo, read = load_directory(tmp_path / "repo")
    assert validate(repo, read) == []
    for payload in render(repo).topics().values():
        canonical_json(payload)


# -- file names: what git or a file system allows that is no text ------------------------------


@pytest.mark.parametrize(
    ("name", "shown"),
    [
        (b"nodes/a\xff.yaml", "nodes/a\\xff.yaml"),  # not UTF-8
        (b"nodes/e\x1b[31mred.yaml", "nodes/e\\x1b[31mred.yaml"),  # a terminal escape
        (b"environments/l\x07b/environment.yaml", "environments/l\\x07b/environment.yaml"),
    ],
    ids=["not-utf8", "escape", "folder"],
)
def test_a_file_name_that_is_no_text_is_reported_printably(tmp_path: Path, name: bytes, shown: str) -> None:
    root = tmp_path / "repo"
    problems_of(tmp_path, {})
    path = Path(os.fsdecode(os.path.join(os.fsencode(root), name)))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("name: x\n")
    work = git.Repo.init(root)
    work.git.add(A=True)
    work.git.commit(
        "-m",
        "odd name",
        env={
            "GIT_AUTHOR_NAME": "t",
            "GIT_AUTHOR_EMAIL": "t@t",
            "GIT_COMMITTER_NAME": "t",
            "GIT_COMMITTER_EMAIL": "t@t",
        },
    )
    for repo, read in (load_directory(root), load_git(root, "HEAD")):
        (p,) = validate(repo, read)
        assert (p.file, p.rule) == (shown, "unknown-file")
        assert "rename it" in p.message
        canonical_json(p.to_dict())  # what config-sync publishes in the sync topic
        assert p.format().isprintable()


def test_what_a_problem_quotes_is_escaped_whichever_check_made_it(tmp_path: Path) -> None:
    # ruamel quotes the duplicate key as it is; the pointer of a node.json key holds it too
    files = service("web", "env:", '  "\\ud800": a', '  "\\ud800": b')
    files[NODE_JSON] = placement()[:-1] + ', "reasons": {"\\u001b[2J": "x"}}'
    found = problems_of(tmp_path, files)
    assert {p.rule for p in found} >= {"yaml-duplicate-key", "json-syntax"}
    for p in found:
        assert p.format().isprintable() and p.path.isprintable(), p
        canonical_json(p.to_dict())
    assert any("\\ud800" in p.message for p in found if p.rule == "yaml-duplicate-key")


def test_a_problem_quoting_a_huge_value_stays_one_readable_line(tmp_path: Path) -> None:
    (p,) = problems_of(tmp_path, service("web", "replicas: '" + "x" * 500_000 + "'"))
    assert (p.rule, p.line, p.column) == ("schema", 5, 11)
    assert len(p.message) <= MAX_MESSAGE_CHARS and "…" in p.message
    assert p.message.startswith("'xxx") and p.message.endswith("xxx' is not of type 'integer'")
