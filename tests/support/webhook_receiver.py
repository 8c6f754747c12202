"""A real HTTP receiver of notifications on 127.0.0.1 for tests (no tests here).

Its port is bound at once but accepts connections only after :meth:`WebhookReceiver.listen`
(before that a POST is refused: the receiver is "down"); it answers each POST with the next
status of ``answers`` (then 200) and records the bodies it answered 2xx.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class WebhookReceiver:
    def __init__(self, answers: list[int] | None = None) -> None:
        self.answers = list(answers or [])
        self.tries: list[int] = []  # the status answered to each POST
        self.received: list[dict[str, Any]] = []  # the JSON bodies answered 2xx
        self.content_types: list[str] = []
        self._lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length)
                with receiver._lock:
                    status = receiver.answers.pop(0) if receiver.answers else 200
                    receiver.tries.append(status)
                    if status < 300:
                        receiver.received.append(json.loads(body))
                        receiver.content_types.append(self.headers.get("Content-Type", ""))
                self.send_response(status)
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"ok")

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler, bind_and_activate=False)
        self.server.daemon_threads = True
        self.server.server_bind()  # bound, not listening: connections are refused
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hooks/T0/B0/secret-token"
        self._thread: threading.Thread | None = None

    def listen(self) -> None:
        self.server.server_activate()
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self._thread.start()

    def events(self) -> list[str]:
        with self._lock:
            return [d.get("event") or d.get("text", "") for d in self.received]

    def close(self) -> None:
        if self._thread is not None:
            self.server.shutdown()
            self._thread.join(5)
        self.server.server_close()


@contextmanager
def webhook_receiver(answers: list[int] | None = None) -> Iterator[WebhookReceiver]:
    receiver = WebhookReceiver(answers)
    try:
        yield receiver
    finally:
        receiver.close()
