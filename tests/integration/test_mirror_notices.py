"""mirror.notices with real Unix sockets: readers that connect get each change as one packet
(in order, with the run and message count), one that left is dropped without disturbing the
others, a payload too large is not sent, and the socket goes when the mirror closes."""

from __future__ import annotations

import json
import socket
from pathlib import Path

from mirror.notices import ChangeNotices
from phrame.settings.mirror_notices import MAX_NOTICE


def reader(path: Path) -> socket.socket:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    sock.settimeout(5)
    sock.connect(str(path))
    return sock


def test_each_reader_gets_each_change_and_a_reader_that_left_is_dropped(tmp_path: Path) -> None:
    notices = ChangeNotices(tmp_path, "actual", "run1")
    notices.open()
    assert notices.path == tmp_path / "actual.sock" and notices.path.exists()
    try:
        first, second = reader(notices.path), reader(notices.path)
        notices.changed(1, "phrame/actual/nodes/n/status", {"state": "online"}, cleared=False)
        notices.changed(2, "phrame/actual/nodes/n/heartbeat", None, cleared=True)
        notices.changed(
            3, "phrame/actual/big", "x" * MAX_NOTICE, cleared=False
        )  # too large: the snapshot tells
        notices.written(3)
        for sock in (first, second):
            got = [json.loads(sock.recv(MAX_NOTICE + 1024)) for _ in range(3)]
            assert [(n["seq"], n.get("topic"), n.get("cleared"), n.get("written")) for n in got] == [
                (1, "phrame/actual/nodes/n/status", False, None),
                (2, "phrame/actual/nodes/n/heartbeat", True, None),
                (3, None, None, True),
            ]
            assert got[0]["payload"] == {"state": "online"} and got[0]["instance"] == "run1"
        first.close()
        notices.changed(4, "phrame/actual/nodes/n/status", {"state": "offline"}, cleared=False)
        notices.changed(5, "phrame/actual/nodes/n/status", {"state": "online"}, cleared=False)
        assert [json.loads(second.recv(MAX_NOTICE))["seq"] for _ in range(2)] == [4, 5]
        assert notices.dropped >= 1  # the large one (and the one the closed reader missed)
    finally:
        notices.close()
    assert not (tmp_path / "actual.sock").exists()
    second.settimeout(1)
    assert second.recv(100) == b""  # the mirror went away: its readers see the end
    second.close()


def test_a_socket_left_by_a_mirror_that_died_is_replaced(tmp_path: Path) -> None:
    dead = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    dead.bind(str(tmp_path / "desired.sock"))
    dead.close()  # the file stays, nobody listens
    notices = ChangeNotices(tmp_path, "desired", "run2")
    notices.open()
    try:
        sock = reader(tmp_path / "desired.sock")
        notices.written(0)
        assert json.loads(sock.recv(1024))["written"] is True
        sock.close()
    finally:
        notices.close()


class Unencodable:
    """A payload whose encoding would raise: shows whether a notice was encoded at all."""


def test_no_reader_means_no_notice_is_encoded(tmp_path: Path) -> None:
    notices = ChangeNotices(tmp_path, "actual", "run3")
    notices.open()
    try:  # every heartbeat of the fleet comes here: with no reader it costs no json.dumps
        notices.changed(1, "phrame/actual/nodes/n/heartbeat", Unencodable(), cleared=False)
        sock = reader(tmp_path / "actual.sock")  # a reader that connects gets the next change
        notices.changed(2, "phrame/actual/nodes/n/status", {"state": "online"}, cleared=False)
        assert json.loads(sock.recv(1024))["seq"] == 2
        assert (notices.sent, notices.dropped) == (1, 0)
        sock.close()
    finally:
        notices.close()
