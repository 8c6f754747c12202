"""node_agent.container_logs: which reports carry a log tail, its bounds, masking, and that
Docker is asked again only when the container changed."""

from __future__ import annotations

import pytest

from node_agent.container_logs import MAX_BYTES, MAX_LINES, LogTails, secret_values, tail_doc, wants_logs
from node_agent.errors import DockerError
from schemas import check_payload


@pytest.mark.parametrize(
    ("payload", "wanted"),
    [
        ({"state": "running", "health": None}, False),
        ({"state": "running", "health": "healthy"}, False),
        ({"state": "missing"}, False),
        ({"state": "created"}, False),
        ({"state": "exited", "exit_code": 1}, True),
        ({"state": "restarting"}, True),
        ({"state": "dead"}, True),
        ({"state": "running", "health": "unhealthy"}, True),
        (
            {"state": "running", "last_exit": {"exit_code": 3, "finished_at": None, "restarted_by": "agent"}},
            True,
        ),
    ],
)
def test_which_reports_carry_logs(payload: dict, wanted: bool) -> None:
    assert wants_logs(payload) is wanted


def test_the_tail_keeps_the_last_lines_within_both_bounds() -> None:
    raw = "".join(f"line {i}\n" for i in range(200)).encode()
    doc = tail_doc(raw)
    assert doc["truncated"] is True and len(doc["lines"]) == MAX_LINES and doc["lines"][-1] == "line 199"
    wide = "".join(f"{i:04d}" + "x" * 400 + "\n" for i in range(40)).encode()
    doc = tail_doc(wide)
    assert sum(len(line) + 1 for line in doc["lines"]) <= MAX_BYTES and doc["lines"][-1].startswith("0039")
    one = tail_doc(b"y" * 20_000 + b"END")
    assert len(one["lines"]) == 1 and one["lines"][0].endswith("END") and len(one["lines"][0]) < MAX_BYTES
    assert tail_doc(b"ok\n") == {"lines": ["ok"], "truncated": False}
    check_payload("actual-item", {"state": "exited", "logs": doc})


def test_secret_values_are_masked_and_undecodable_bytes_do_not_fail() -> None:
    spec = {"env": {"DB": {"file": "db"}, "API_TOKEN": "tok-123456", "MODE": "prod", "X": {"file": "gone"}}}

    def read(name: str) -> str:
        if name == "gone":
            raise OSError("no such file")
        return "hunter22\n"

    secrets = secret_values(spec, read)
    assert sorted(secrets) == [
        "hunter22",
        "tok-123456",
    ]  # MODE is no secret; an unreadable file masks nothing
    doc = tail_doc(b"connecting with hunter22 and tok-123456 in prod\n\xff\xfe\n", secrets)
    assert doc["lines"][0] == "connecting with *** and *** in prod"
    assert "hunter22" not in str(doc) and len(doc["lines"]) == 2


def test_docker_is_asked_again_only_when_the_container_changed() -> None:
    calls: list[str] = []
    fail = [False]

    def tail(cid: str, lines: int) -> bytes:
        calls.append(cid)
        if fail[0]:
            raise DockerError("daemon away")
        return f"out of {cid}\n".encode()

    tails = LogTails(tail)
    assert tails.of("c1", ("exited", 1), list) == {"lines": ["out of c1"], "truncated": False}
    assert tails.of("c1", ("exited", 1), list) is not None and calls == ["c1"]
    fail[0] = True
    assert tails.of("c1", ("exited", 2), list) is None  # not held: the next report asks again
    fail[0] = False
    assert tails.of("c1", ("exited", 2), list) is not None and calls == ["c1", "c1", "c1"]
    tails.keep_only([])
    tails.of("c1", ("exited", 2), list)
    assert len(calls) == 4  # forgotten with its container
