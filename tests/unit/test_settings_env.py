"""Reading settings: empty means unset, bad values name the variable, secrets from files."""

from __future__ import annotations

from pathlib import Path

import pytest

from phrame.settings import EnvReader


class Bad(Exception):
    pass


def test_values_defaults_and_empty_as_unset() -> None:
    r = EnvReader({"A": " 5 ", "B": "", "F": "yes", "P": "/x"}, error=Bad)
    assert r.number("A", 1.0) == 5.0 and r.integer("A", 1) == 5
    assert r.number("B", 2.5) == 2.5 and r.text("B", "d") == "d"
    assert r.flag("F", False) is True and r.flag("MISSING", True) is True
    assert r.path("P") == Path("/x") and r.path("MISSING") is None
    assert r.choice("MISSING", "local", ("local", "gitlab")) == "local"


@pytest.mark.parametrize(
    ("env", "call", "needle"),
    [
        ({"N": "five"}, lambda r: r.number("N", 1), "N='five' is not a number"),
        ({"N": "-1"}, lambda r: r.number("N", 1, minimum=0), "must be at least 0"),
        ({"N": "1.5"}, lambda r: r.integer("N", 1), "whole number"),
        ({"F": "maybe"}, lambda r: r.flag("F", True), "true or false"),
        ({"H": "svn"}, lambda r: r.choice("H", "local", ("local", "gitlab")), "one of local, gitlab"),
        ({"S": "x", "S_FILE": "/y"}, lambda r: r.secret("S"), "not both"),
        ({"S_FILE": "/nonexistent/secret"}, lambda r: r.secret("S"), "cannot read /nonexistent/secret"),
    ],
)
def test_bad_values_raise_the_callers_error_naming_the_variable(env: dict, call: object, needle: str) -> None:
    with pytest.raises(Bad, match=needle):
        call(EnvReader(env, error=Bad))  # type: ignore[operator]


def test_secret_from_file_drops_one_trailing_newline(tmp_path: Path) -> None:
    f = tmp_path / "token"
    f.write_text("s3cret\n")
    assert EnvReader({"T_FILE": str(f)}).secret("T") == "s3cret"
    assert EnvReader({"T": "inline"}).secret("T") == "inline"
    assert EnvReader({}).secret("T") is None


def test_a_required_setting_says_what_it_holds() -> None:
    assert EnvReader({"R": " x "}).required("R", "a path") == "x"
    for env in ({}, {"R": "  "}):
        with pytest.raises(Bad, match=r"^R is required \(a path\)$"):
            EnvReader(env, error=Bad).required("R", "a path")
