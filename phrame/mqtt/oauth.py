"""OAuth2 client-credentials tokens (RFC 6749 §4.4) used as the MQTT password.

:class:`TokenProvider` is owned by :class:`phrame.mqtt.client.MqttClient`: a background
thread fetches a token, refreshes it at 3/4 of its lifetime and reports each new one.
Endpoint failures are retried with backoff (tenacity) until it answers again; they are
logged, never raised into the caller's loop, and the client secret is never logged.
"""

from __future__ import annotations

import base64
import http.client
import json
import logging
import random
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass

from tenacity import RetryCallState, Retrying, retry_if_exception_type

from phrame.mqtt.errors import TokenError
from phrame.mqtt.settings import MqttSettings
from phrame.runtime import backoff

log = logging.getLogger(__name__)

REFRESH_FRACTION = 0.75  # refresh when this share of the lifetime has passed
DEFAULT_LIFETIME_S = 300.0  # when the endpoint does not say (expires_in is only RECOMMENDED)


@dataclass(frozen=True)
class Token:
    value: str = ""
    lifetime_s: float = DEFAULT_LIFETIME_S
    fetched_at: float = 0.0  # on the provider's clock

    def refresh_at(self) -> float:
        return self.fetched_at + max(0.5, self.lifetime_s * REFRESH_FRACTION)


def parse_token_response(body: bytes, *, now: float) -> Token:
    """The token in a successful (HTTP 200) token endpoint response (RFC 6749 §5.1)."""
    try:
        doc = json.loads(body)
    except ValueError as e:
        raise TokenError("token endpoint answered with something that is not JSON") from e
    if not isinstance(doc, dict) or not isinstance(doc.get("access_token"), str):
        raise TokenError("token endpoint response has no access_token")
    expires_in = doc.get("expires_in")
    lifetime = float(expires_in) if isinstance(expires_in, int | float) else DEFAULT_LIFETIME_S
    return Token(value=doc["access_token"], lifetime_s=lifetime, fetched_at=now)


class TokenProvider:
    """Keeps a fresh token; ``on_token(token)`` is called from its thread for each new one."""

    def __init__(
        self,
        settings: MqttSettings,
        *,
        on_token: Callable[[str], None] | None = None,
        clock: Callable[[], float] = time.monotonic,
        http_timeout_s: float = 10.0,
    ) -> None:
        if not settings.oauth2_token_url:
            raise TokenError("no PHRAME_OAUTH2_TOKEN_URL configured")
        self._settings = settings
        self._on_token = on_token
        self._clock = clock
        self._http_timeout_s = http_timeout_s
        self._token: Token | None = None
        self._have_token = threading.Event()
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.fetch_count = 0

    @property
    def current(self) -> str | None:
        token = self._token
        return token.value if token else None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="phrame-oauth2", daemon=True)
        self._thread.start()

    def has_token(self) -> bool:
        return self._have_token.is_set()

    def refresh_now(self) -> None:
        """Ask for a new token at once (e.g. after the broker refused the current one)."""
        self._wake.set()

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread and self._thread is not threading.current_thread():
            self._thread.join(timeout=self._http_timeout_s + 1)

    def fetch(self) -> Token:
        """One request to the token endpoint; raises :class:`TokenError`."""
        s = self._settings
        assert s.oauth2_token_url and s.oauth2_client_id and s.oauth2_client_secret is not None
        form = {"grant_type": "client_credentials"}
        if s.oauth2_scope:
            form["scope"] = s.oauth2_scope
        # RFC 6749 §2.3.1: id and secret are form-encoded before they are base64-encoded.
        pair = f"{_form(s.oauth2_client_id)}:{_form(s.oauth2_client_secret)}"
        request = urllib.request.Request(
            s.oauth2_token_url,
            data=urllib.parse.urlencode(form).encode(),
            headers={
                "Authorization": "Basic " + base64.b64encode(pair.encode()).decode(),
                "Content-Type": "application/x-www-form-urlencoded",
                "Accept": "application/json",
            },
            method="POST",
        )
        try:
            with urllib.request.urlopen(request, timeout=self._http_timeout_s) as response:
                body = response.read()
        except urllib.error.HTTPError as e:
            detail = e.read()[:200].decode(errors="replace")
            raise TokenError(f"token endpoint {s.oauth2_token_url} answered {e.code}: {detail}") from e
        except (urllib.error.URLError, OSError) as e:
            raise TokenError(f"token endpoint {s.oauth2_token_url} unreachable: {e}") from e
        except (http.client.HTTPException, ValueError) as e:  # a cut or garbled answer
            raise TokenError(f"token endpoint {s.oauth2_token_url} answered badly: {e!r}") from e
        self.fetch_count += 1
        return parse_token_response(body, now=self._clock())

    def _run(self) -> None:
        retrying = Retrying(
            retry=retry_if_exception_type(TokenError),
            wait=lambda state: (
                backoff(state.attempt_number, base=0.5, cap=self._settings.oauth2_retry_max_s)
                + random.uniform(0, 0.25)  # spread: clients whose endpoint failed together
            ),
            stop=lambda _state: self._stop.is_set(),
            sleep=self._sleep,
            before_sleep=self._log_retry,
            reraise=True,
        )
        while not self._stop.is_set():
            try:
                token = retrying(self.fetch)
            except TokenError:
                return  # only when stopping
            except Exception:  # a bug or a surprise: never the end of token refresh
                log.exception("fetching an OAuth2 token failed unexpectedly; retrying")
                self._sleep(self._settings.oauth2_retry_max_s)
                continue
            self._token = token
            self._have_token.set()
            log.info(
                "got an OAuth2 token for %s, valid %.0fs", self._settings.oauth2_client_id, token.lifetime_s
            )
            if self._on_token:
                try:
                    self._on_token(token.value)
                except Exception:
                    log.exception("handling a new OAuth2 token failed")
            self._wake.clear()
            self._wake.wait(max(0.0, token.refresh_at() - self._clock()))

    def _sleep(self, seconds: float) -> None:
        self._stop.wait(seconds)  # a stop() ends the backoff at once

    def _log_retry(self, state: RetryCallState) -> None:
        error = state.outcome.exception() if state.outcome else None
        wait = state.next_action.sleep if state.next_action else 0.0
        log.warning(
            "OAuth2 token fetch failed (attempt %d), retrying in %.1fs: %s", state.attempt_number, wait, error
        )


def _form(value: str) -> str:
    return urllib.parse.quote_plus(value)
