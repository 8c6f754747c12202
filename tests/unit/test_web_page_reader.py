"""A page poll reads an answer cut short (a container replaced mid-answer) as "not yet"."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator

import pytest

from tests.support.web import page_text


@pytest.fixture
def short_server() -> Iterator[tuple[int, list[bytes]]]:
    """127.0.0.1 server that answers each request with the next canned bytes, then closes."""
    answers: list[bytes] = []
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()

    def serve() -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            with conn:
                conn.recv(65536)
                if answers:
                    conn.sendall(answers.pop(0))

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield listener.getsockname()[1], answers
    listener.shutdown(socket.SHUT_RDWR)  # wakes the accept() (a close alone does not)
    listener.close()
    thread.join(5)


def test_a_body_cut_short_is_not_yet(short_server: tuple[int, list[bytes]]) -> None:
    port, answers = short_server
    answers.append(b"HTTP/1.0 200 OK\r\nContent-Length: 107\r\n\r\nHello")
    assert page_text(f"http://127.0.0.1:{port}/") == ""


def test_a_garbled_status_line_is_not_yet(short_server: tuple[int, list[bytes]]) -> None:
    port, answers = short_server
    answers.append(b"HTTX 200\r\n\r\n")
    assert page_text(f"http://127.0.0.1:{port}/") == ""


def test_a_whole_answer_is_read(short_server: tuple[int, list[bytes]]) -> None:
    port, answers = short_server
    answers.append(b"HTTP/1.0 200 OK\r\nContent-Length: 5\r\n\r\nHello")
    assert page_text(f"http://127.0.0.1:{port}/") == "Hello"
