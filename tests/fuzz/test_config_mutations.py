"""The sample repository (``fixtures/phrame-config``) with one file damaged at the byte
level: a bit flipped, the file cut short, bytes inserted or removed, a line doubled. The
damage lands in a real, rich file, so the readers' paths past the syntax checks (schemas,
rules, render, placement) see it too. The property is :func:`tests.fuzz.config_check.check_repo`."""

from __future__ import annotations

import subprocess
import tempfile
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from phrame.config_repo import load_directory, load_git, validate
from tests.fuzz.config_check import check_repo, write
from tests.fuzz.profile import fuzz

SAMPLE = Path(__file__).resolve().parents[2] / "fixtures" / "phrame-config"
FILES = {str(p.relative_to(SAMPLE)): p.read_bytes() for p in sorted(SAMPLE.rglob("*")) if p.is_file()}
TARGETS = sorted(f for f in FILES if f.startswith(("nodes/", "environments/")))


def test_the_sample_repo_is_valid() -> None:
    assert check_repo(dict(FILES)) == []


@st.composite
def damaged(draw: st.DrawFn, data: bytes) -> bytes:
    at = draw(st.integers(0, len(data)))
    how = draw(st.sampled_from(["flip", "cut", "insert", "delete", "double", "swap"]))
    if how == "flip" and at < len(data):
        return data[:at] + bytes([data[at] ^ (1 << draw(st.integers(0, 7)))]) + data[at + 1 :]
    if how == "cut":
        return data[:at]
    if how == "insert":
        noise = draw(
            st.one_of(
                st.binary(min_size=1, max_size=8),
                st.sampled_from(
                    [b"\t", b"\r", b"&a ", b"*a", b"<<: *a", b"\n- ", b": ", b"!!int ", b"\xed\xa0\x80"]
                ),
            )
        )
        return data[:at] + noise + data[at:]
    if how == "delete":
        return data[:at] + data[at + draw(st.integers(1, 16)) :]
    lines = data.split(b"\n")
    i = draw(st.integers(0, len(lines) - 1))
    if how == "double":
        lines.insert(i, lines[i])
    else:
        j = draw(st.integers(0, len(lines) - 1))
        lines[i], lines[j] = lines[j], lines[i]
    return b"\n".join(lines)


@fuzz()
@given(data=st.data(), target=st.sampled_from(TARGETS), times=st.integers(1, 3))
def test_the_sample_repo_with_one_file_damaged(data: st.DataObject, target: str, times: int) -> None:
    content = FILES[target]
    for _ in range(times):
        content = data.draw(damaged(content))
    check_repo({**FILES, target: content})


@fuzz(0.1)  # a git commit per example
@given(data=st.data(), target=st.sampled_from(TARGETS))
def test_git_and_directory_readers_agree_on_a_damaged_repo(data: st.DataObject, target: str) -> None:
    """Placement and config-sync read commits (``load_git``), ``phrame validate PATH`` a
    folder: the same bytes must give the same problems either way."""
    files = {**FILES, target: data.draw(damaged(FILES[target]))}
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        write(root, files)
        git = ["git", "-C", tmp, "-c", "user.name=fuzz", "-c", "user.email=fuzz@127.0.0.1"]
        subprocess.run([*git, "init", "-q"], check=True)
        subprocess.run([*git, "add", "-A"], check=True)
        subprocess.run([*git, "commit", "-q", "-m", "fuzz"], check=True)
        from_git = validate(*load_git(root, "HEAD"))
        from_dir = validate(*load_directory(root))
    assert from_git == from_dir
