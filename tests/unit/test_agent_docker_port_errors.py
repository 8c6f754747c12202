"""DockerPort converts what the Docker SDK raises, and only that: a programming error
(a wrong argument, a bug in our own code) leaves as itself, so the executor logs it with
its traceback instead of reporting a permanent DockerError. No daemon is needed: the
client points at a port nothing listens on."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import docker
import pytest

from node_agent.docker_port import DockerPort
from node_agent.errors import DockerError, NotFound
from phrame.runtime import is_temporary
from tests.support.services import free_port


@pytest.fixture
def port() -> Iterator[DockerPort]:
    nowhere = docker.DockerClient(base_url=f"tcp://127.0.0.1:{free_port()}", version="1.41")
    try:
        yield DockerPort("node-a", client=nowhere, attempts=1)
    finally:
        nowhere.close()


def test_a_programming_error_is_not_disguised_as_a_docker_error(port: DockerPort) -> None:
    # the SDK's own TypeError for a wrong keyword: our bug, not Docker's answer
    with pytest.raises(TypeError):
        port._call("list containers", port.api.containers, everything=True)


def test_an_unreachable_daemon_is_still_a_transient_docker_error(port: DockerPort) -> None:
    with pytest.raises(DockerError) as caught:
        port.list_containers()
    assert is_temporary(caught.value) and "Docker unreachable" in str(caught.value)


def test_once_a_call_found_no_daemon_the_next_ones_are_tried_once() -> None:
    """A pass cut short by a dockerd restart has many calls left (an inspect per container
    to report): retried with backoff each, they delayed the report that the daemon is away
    by seconds per call. After one call found no daemon, the next are tried once each."""
    nowhere = docker.DockerClient(base_url=f"tcp://127.0.0.1:{free_port()}", version="1.41")
    try:
        port = DockerPort("node-a", client=nowhere, attempts=3)
        for name in ("a", "b", "c"):
            with pytest.raises(DockerError, match="Docker unreachable"):
                port.inspect_container(name)
        assert port.calls["inspect_container"] == 3 + 1 + 1, port.calls
    finally:
        nowhere.close()


class _NoSuchContainer(BaseHTTPRequestHandler):
    """Docker's answer for an unknown container (HTTP/1.0: one request per connection)."""

    def do_GET(self) -> None:
        body = b'{"message": "No such container"}'
        self.send_response(404)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@contextlib.contextmanager
def answering(port: int) -> Iterator[None]:
    server = ThreadingHTTPServer(("127.0.0.1", port), _NoSuchContainer)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


def test_any_answer_of_the_daemon_brings_the_retries_back() -> None:
    where = free_port()
    client = docker.DockerClient(base_url=f"tcp://127.0.0.1:{where}", version="1.41")
    try:
        port = DockerPort("node-a", client=client, attempts=3)
        with pytest.raises(DockerError, match="Docker unreachable"):
            port.inspect_container("a")
        with answering(where), pytest.raises(NotFound):  # tried once, answered: it is back
            port.inspect_container("b")
        with pytest.raises(DockerError, match="Docker unreachable"):  # a blip: retried again
            port.inspect_container("c")
        assert port.calls["inspect_container"] == 3 + 1 + 3, port.calls
    finally:
        client.close()
