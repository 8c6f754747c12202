"""An OAuth2 token endpoint and an MQTT broker that checks its tokens, for tests only.

``token`` serves RFC 6749 §4.4 client credentials (Starlette under uvicorn) and issues
HMAC-signed tokens with a short lifetime; ``broker`` runs amqtt with
:class:`TokenAuthPlugin`, which admits a CONNECT only if the password is such a token,
correctly signed, unexpired and issued to the user name. Both run as child processes
(``python -m tests.support.oauth_server token|broker ...``) so a test can stop and restart
them by pid; :class:`TokenServer` and :class:`TokenBroker` do that.
"""

from __future__ import annotations

import argparse
import base64
import binascii
import hashlib
import hmac
import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Self
from urllib.parse import parse_qs, unquote_plus

from tests.support.services import free_port, stop_process, wait_for_port

ROOT = Path(__file__).parents[2]


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def mint_token(secret: str, subject: str, expires_at: float) -> str:
    """``payload.signature``: base64url JSON claims and their HMAC-SHA256."""
    claims = _b64(json.dumps({"sub": subject, "exp": expires_at, "iat": time.time()}).encode())
    signature = hmac.new(secret.encode(), claims.encode(), hashlib.sha256).digest()
    return f"{claims}.{_b64(signature)}"


def verify_token(secret: str, token: str, *, now: float | None = None) -> str | None:
    """The token's subject if the signature is right and it has not expired, else None."""
    try:
        claims_b64, signature_b64 = token.split(".")
        expected = hmac.new(secret.encode(), claims_b64.encode(), hashlib.sha256).digest()
        if not hmac.compare_digest(expected, _unb64(signature_b64)):
            return None
        claims = json.loads(_unb64(claims_b64))
    except (ValueError, binascii.Error):
        return None
    if float(claims["exp"]) <= (time.time() if now is None else now):
        return None
    return str(claims["sub"])


# -- the token endpoint (Starlette)


def token_app(secret: str, clients: dict[str, str], lifetime: float) -> Any:
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    issued = {"count": 0}

    def error(code: str, status: int) -> JSONResponse:
        headers = {"WWW-Authenticate": 'Basic realm="token"'} if status == 401 else None
        return JSONResponse({"error": code}, status_code=status, headers=headers)

    async def token(request: Request) -> JSONResponse:
        # application/x-www-form-urlencoded, parsed here: Starlette's form() would need
        # python-multipart, which the project does not depend on.
        form = {k: v[0] for k, v in parse_qs((await request.body()).decode()).items()}
        client_id, client_secret = form.get("client_id"), form.get("client_secret")
        auth = request.headers.get("authorization", "")
        if auth.lower().startswith("basic "):
            pair = base64.b64decode(auth[6:]).decode()
            client_id, _, client_secret = (unquote_plus(p) for p in pair.partition(":"))
        if form.get("grant_type") != "client_credentials":
            return error("unsupported_grant_type", 400)
        if not isinstance(client_id, str) or not hmac.compare_digest(
            clients.get(client_id, "\x00"), str(client_secret)
        ):
            return error("invalid_client", 401)
        issued["count"] += 1
        access = mint_token(secret, client_id, time.time() + lifetime)
        body = {"access_token": access, "token_type": "Bearer", "expires_in": lifetime}
        return JSONResponse(body, headers={"Cache-Control": "no-store"})

    async def stats(_request: Request) -> JSONResponse:
        return JSONResponse({"issued": issued["count"]})

    return Starlette(routes=[Route("/token", token, methods=["POST"]), Route("/stats", stats)])


# -- the broker's authentication plugin (amqtt)

try:
    from amqtt.plugins.base import BaseAuthPlugin
except ImportError:  # amqtt missing: the OAuth tests skip (require) before using this
    BaseAuthPlugin = object


class TokenAuthPlugin(BaseAuthPlugin):
    """Admits a client only with a valid token for its user name; logs every decision."""

    @dataclass
    class Config:
        secret: str = ""
        log_file: str = ""

    async def authenticate(self, *, session: Any) -> bool:
        subject = verify_token(self.config.secret, session.password or "")
        ok = subject is not None and subject == session.username
        with open(self.config.log_file, "a", encoding="utf-8") as log:
            log.write(f"{'ok' if ok else 'refused'} {session.username} {time.time():.3f}\n")
        return ok


# -- child processes


class _Child:
    args: list[str]
    port: int
    proc: subprocess.Popen[bytes] | None = None

    def start(self) -> Self:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tests.support.oauth_server", *self.args],
            cwd=ROOT,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        if not wait_for_port(self.port, timeout=20):
            self.stop()
            raise RuntimeError(f"{self.args[0]} did not listen on {self.port}")
        return self

    def stop(self) -> None:
        stop_process(self.proc)
        self.proc = None


class TokenServer(_Child):
    def __init__(self, secret: str, clients: dict[str, str], *, lifetime: float) -> None:
        self.port = free_port()
        spec = ",".join(f"{k}:{v}" for k, v in clients.items())
        self.args = ["token", str(self.port), secret, spec, str(lifetime)]

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/token"

    def issued(self) -> int:
        import urllib.request

        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/stats", timeout=5) as r:
            return int(json.load(r)["issued"])


class TokenBroker(_Child):
    def __init__(self, secret: str, log_file: Path) -> None:
        self.port = free_port()
        self.log_file = log_file
        self.args = ["broker", str(self.port), secret, str(log_file)]

    @property
    def url(self) -> str:
        return f"mqtt://127.0.0.1:{self.port}"

    def connect_times(self, user: str) -> list[float]:
        """Wall-clock times of the accepted CONNECTs of ``user``."""
        return [float(t) for d, u, t in self._entries() if u == user and d == "ok"]

    def _entries(self) -> list[list[str]]:
        if not self.log_file.exists():
            return []
        return [line.split() for line in self.log_file.read_text().splitlines() if line.strip()]

    def decisions(self, user: str) -> list[str]:
        """``ok``/``refused`` for each CONNECT of ``user``, in order."""
        return [d for d, u, _t in self._entries() if u == user]


def _serve_broker(port: int, secret: str, log_file: str) -> None:
    import asyncio

    from amqtt.broker import Broker

    config = {
        "listeners": {"default": {"type": "tcp", "bind": f"127.0.0.1:{port}"}},
        "plugins": {"tests.support.oauth_server.TokenAuthPlugin": {"secret": secret, "log_file": log_file}},
    }

    async def main() -> None:
        broker = Broker(config)
        await broker.start()
        await asyncio.Event().wait()

    asyncio.run(main())


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("role", choices=("token", "broker"))
    parser.add_argument("port", type=int)
    parser.add_argument("secret")
    parser.add_argument("rest", nargs="*")
    args = parser.parse_args()
    if args.role == "token":
        import uvicorn

        spec, lifetime = args.rest
        clients = dict(pair.split(":", 1) for pair in spec.split(",") if pair)
        app = token_app(args.secret, clients, float(lifetime))
        uvicorn.run(app, host="127.0.0.1", port=args.port, log_level="warning")
    else:
        _serve_broker(args.port, args.secret, args.rest[0])


if __name__ == "__main__":
    main()
