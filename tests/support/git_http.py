"""A git smart-HTTP server over TLS that checks a GitLab-style token, for tests only.

:class:`GitHttpServer` serves the bare repositories under ``root`` through the real
``git http-backend`` (CGI) behind a threaded stdlib HTTPS server on 127.0.0.1. Like
GitLab, it wants HTTP Basic auth whose password is the token (any user name; the code
sends ``oauth2``) and answers 401 with ``WWW-Authenticate: Basic realm="GitLab"``
otherwise. Every request is recorded so a test can assert what the server saw; while
each request is in flight it also reads every process's argv (``/proc/*/cmdline``), so
a test can prove the token never appears on a git command line.
"""

from __future__ import annotations

import base64
import binascii
import hmac
import logging
import socket
import ssl
import subprocess
import threading
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Self
from urllib.parse import quote, urlsplit

log = logging.getLogger(__name__)

CGI_TIMEOUT_S = 60.0


@dataclass(frozen=True)
class SeenRequest:
    method: str
    path: str  # path and query as sent, e.g. /config.git/info/refs?service=git-upload-pack
    status: int
    is_authorized: bool
    user: str | None  # the Basic auth user name, if any was sent


def _http_backend() -> str:
    exec_path = subprocess.run(["git", "--exec-path"], check=True, capture_output=True, text=True)
    return str(Path(exec_path.stdout.strip()) / "git-http-backend")


def _basic_credentials(header: str | None) -> tuple[str, str] | None:
    if not header or not header.lower().startswith("basic "):
        return None
    try:
        user, sep, password = base64.b64decode(header[6:].strip(), validate=True).decode().partition(":")
    except (binascii.Error, UnicodeDecodeError):
        return None
    return (user, password) if sep else None


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    _status = 0
    timeout = 30  # a stuck client cannot hold a handler thread (and so stop()) forever

    def do_GET(self) -> None:
        self._serve()

    def do_POST(self) -> None:
        self._serve()

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("git-http: " + format, *args)

    def _serve(self) -> None:
        owner = self.server.owner
        owner.scan_argv()  # the client's git processes are alive, waiting for this answer
        creds = _basic_credentials(self.headers.get("Authorization"))
        user = creds[0] if creds else None
        is_authorized = creds is not None and hmac.compare_digest(creds[1].encode(), owner.token.encode())
        body = self._read_body()
        if not is_authorized:
            self._reply(401, {"WWW-Authenticate": 'Basic realm="GitLab"'}, b"HTTP Basic: Access denied\n")
        else:
            self._cgi(user or "", body)
        owner.record(SeenRequest(self.command, self.path, self._status, is_authorized, user))

    def _read_body(self) -> bytes:
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            chunks = []
            while size := int(self.rfile.readline().split(b";")[0].strip() or b"0", 16):
                chunks.append(self.rfile.read(size))
                self.rfile.readline()
            while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                pass  # trailers
            return b"".join(chunks)
        return self.rfile.read(int(self.headers.get("Content-Length") or 0))

    def _cgi(self, user: str, body: bytes) -> None:
        parts = urlsplit(self.path)
        env = {
            "GIT_PROJECT_ROOT": str(self.server.owner.root),
            "GIT_HTTP_EXPORT_ALL": "1",
            "REMOTE_USER": user,
            "REMOTE_ADDR": self.client_address[0],
            "REQUEST_METHOD": self.command,
            "PATH_INFO": parts.path,
            "QUERY_STRING": parts.query,
            "CONTENT_TYPE": self.headers.get("Content-Type", ""),
            "CONTENT_LENGTH": str(len(body)),
            "GATEWAY_INTERFACE": "CGI/1.1",
            "SERVER_PROTOCOL": "HTTP/1.1",
            "PATH": "/usr/bin:/bin",
        }
        for header, var in (("Content-Encoding", "HTTP_CONTENT_ENCODING"), ("Git-Protocol", "GIT_PROTOCOL")):
            if self.headers.get(header):
                env[var] = self.headers[header]
        done = subprocess.run(
            [self.server.owner.backend], input=body, env=env, capture_output=True, timeout=CGI_TIMEOUT_S
        )
        head, sep, payload = done.stdout.partition(b"\r\n\r\n")
        if not sep:
            head, sep, payload = done.stdout.partition(b"\n\n")
        status, headers = 200, {}
        for line in head.decode("latin-1").splitlines():
            name, _, value = line.partition(":")
            if name.lower() == "status":
                status = int(value.split()[0])
            elif name:
                headers[name.strip()] = value.strip()
        if done.returncode != 0 and status == 200:
            status, payload = 500, done.stderr
        self._reply(status, headers, payload)

    def _reply(self, status: int, headers: dict[str, str], payload: bytes) -> None:
        self._status = status
        self.send_response(status)
        for name, value in headers.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)


class _Server(ThreadingHTTPServer):
    daemon_threads = False  # server_close() joins the handler threads: a clean stop
    owner: GitHttpServer

    def get_request(self) -> tuple[socket.socket, Any]:
        sock, address = self.socket.accept()
        # the TLS handshake happens in the handler thread, so a client that rejects our
        # certificate only ends its own thread, never the accept loop
        return self.owner.context.wrap_socket(sock, server_side=True, do_handshake_on_connect=False), address

    def handle_error(self, request: Any, client_address: Any) -> None:
        log.debug("git-http: connection from %s failed", client_address, exc_info=True)
        self.owner.note_failure()


class GitHttpServer:
    """``https://127.0.0.1:<port>/<name>.git`` for each bare repo ``root/<name>.git``."""

    def __init__(self, root: Path, *, token: str, cert: Path, key: Path) -> None:
        self.root = root
        self.token = token
        self.backend = _http_backend()
        self.context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self.context.load_cert_chain(cert, key)
        self.requests: list[SeenRequest] = []
        self.failed_connections = 0  # connections that ended in an error (a TLS alert, say)
        self.argv_leaks: list[str] = []  # "pid program" of each process whose argv held the token
        self.argv_scans = 0
        basic = base64.b64encode(f"oauth2:{token}".encode())
        self._needles = (token.encode(), quote(token, safe="").encode(), basic)
        self._lock = threading.Lock()
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    def url(self, name: str) -> str:
        return f"https://127.0.0.1:{self.port}/{name}"

    @property
    def port(self) -> int:
        assert self._server is not None, "start() the server first"
        return int(self._server.server_address[1])

    def record(self, request: SeenRequest) -> None:
        with self._lock:
            self.requests.append(request)

    def note_failure(self) -> None:
        with self._lock:
            self.failed_connections += 1

    def scan_argv(self) -> None:
        leaks = []
        for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
            try:
                argv = cmdline.read_bytes()
            except OSError:
                continue  # the process ended meanwhile
            if any(needle in argv for needle in self._needles):
                program = argv.split(b"\0")[0].decode(errors="replace")
                leaks.append(f"{cmdline.parent.name} {program}")
        with self._lock:
            self.argv_scans += 1
            self.argv_leaks.extend(leaks)

    def seen(self) -> list[SeenRequest]:
        with self._lock:
            return list(self.requests)

    def start(self) -> Self:
        self._server = _Server(("127.0.0.1", 0), _Handler)
        self._server.owner = self
        self._thread = threading.Thread(target=self._server.serve_forever, name="git-http", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is None:
            return
        self._server.shutdown()  # ends serve_forever
        self._server.server_close()  # closes the socket and joins the handler threads
        if self._thread is not None:
            self._thread.join(timeout=10)
        self._server = self._thread = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *_exc: object) -> None:
        self.stop()
