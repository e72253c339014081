"""Talking to Microsoft Graph and the identity platform: HTTP with timeouts, OAuth tokens,
throttling and expired tokens handled once for every OneDrive call.

Over the connectors' HTTP client (connectors/onedrive_http.py): every request has a
timeout, no call follows a link to another host with our token, and nothing here
touches the database (the token source given to `GraphClient` does that).
"""

import base64
import dataclasses
import hashlib
import json
import secrets
import time
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.conf import settings

from connectors.base import NeedsReconnect, ProviderBusy, ProviderError
from connectors.onedrive_http import HTTP_FAILURES, http_client
from connectors.problems import Problem

# Every call to Microsoft waits at most this long for each read; a call a person waits on
# (connecting a folder) at most REQUEST_TIMEOUT_SECONDS.
TIMEOUT_SECONDS = 10.0
REQUEST_TIMEOUT_SECONDS = 5
# Access tokens are refreshed this long before they expire.
REFRESH_MARGIN_SECONDS = 300.0
# A 429/503 whose Retry-After is at most this is waited for within the call (up to three
# times); a longer one ends the sync as "busy" and it is tried again after Retry-After.
INLINE_WAIT_SECONDS = 5.0


@dataclass(frozen=True)
class OneDriveConfig:
    """The app registration and endpoints, from the PAPERLANE_ONEDRIVE_* settings, and
    the timeouts and waits above."""

    client_id: str
    client_secret: str
    tenant: str
    login_url: str
    graph_url: str
    scopes: str
    timeout: float
    refresh_margin: float
    inline_wait_limit: float

    @classmethod
    def from_settings(cls) -> "OneDriveConfig":
        return cls(
            client_id=settings.PAPERLANE_ONEDRIVE_CLIENT_ID,
            client_secret=settings.PAPERLANE_ONEDRIVE_CLIENT_SECRET,
            tenant=settings.PAPERLANE_ONEDRIVE_TENANT,
            login_url=settings.PAPERLANE_ONEDRIVE_LOGIN_URL.rstrip("/"),
            graph_url=settings.PAPERLANE_ONEDRIVE_GRAPH_URL.rstrip("/"),
            scopes=settings.PAPERLANE_ONEDRIVE_SCOPES,
            timeout=TIMEOUT_SECONDS,
            refresh_margin=REFRESH_MARGIN_SECONDS,
            inline_wait_limit=INLINE_WAIT_SECONDS,
        )

    def for_request(self) -> "OneDriveConfig":
        """This configuration for calls a person waits on (the sign-in's callback): no
        Retry-After is waited for, and each call has at most REQUEST_TIMEOUT_SECONDS."""
        return dataclasses.replace(
            self, inline_wait_limit=0, timeout=min(self.timeout, REQUEST_TIMEOUT_SECONDS)
        )

    @property
    def configured(self) -> bool:
        return bool(self.client_id and self.client_secret)

    def endpoint(self, name: str) -> str:
        tenant = urllib.parse.quote(self.tenant, safe="")
        return f"{self.login_url}/{tenant}/oauth2/v2.0/{name}"


@dataclass(frozen=True)
class Tokens:
    access_token: str
    refresh_token: str
    # Seconds since the epoch.
    expires_at: float

    def expiring(self, margin: float) -> bool:
        return self.expires_at - margin <= time.time()

    def as_dict(self) -> dict[str, Any]:
        return {
            "access_token": self.access_token,
            "refresh_token": self.refresh_token,
            "expires_at": self.expires_at,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "Tokens":
        try:
            return cls(data["access_token"], data["refresh_token"], float(data["expires_at"]))
        except (KeyError, TypeError, ValueError):
            raise NeedsReconnect("OneDrive is not connected; connect it again.") from None


@dataclass
class Answer:
    status: int
    headers: dict[str, str]
    body: bytes

    def json(self) -> dict[str, Any]:
        try:
            data = json.loads(self.body or b"{}")
        except ValueError:
            raise ProviderError(
                f"OneDrive answered {self.status} with a body that is not JSON."
            ) from None
        if not isinstance(data, dict):
            raise ProviderError(f"OneDrive answered {self.status} with unexpected JSON.")
        return data

    def error_code(self) -> str:
        try:
            data = json.loads(self.body or b"{}")
        except ValueError:
            return ""
        error = data.get("error") if isinstance(data, dict) else None
        if isinstance(error, dict):
            return str(error.get("code", ""))
        return str(error or "")


def http_request(
    method: str,
    url: str,
    *,
    timeout: float,
    headers: dict[str, str] | None = None,
    body: bytes | None = None,
    max_bytes: int = 16 * 1024 * 1024,
) -> Answer:
    """One HTTP exchange; every status is an Answer. A 302 (Graph's /content, a 410's
    fresh start) is read by the caller, not followed. Network failures are ProviderError."""
    with http_client(timeout=timeout) as client:
        try:
            request = client.build_request(method, url, headers=headers, content=body)
            response = client.send(request, stream=True)
        except HTTP_FAILURES as exc:
            raise ProviderError(
                f"Could not reach OneDrive ({exc}).", kind=Problem.PROVIDER_UNAVAILABLE
            ) from exc
        data = bytearray()
        try:
            for block in response.iter_raw():
                data += block
                if len(data) > max_bytes:
                    raise ProviderError("OneDrive sent an answer larger than expected.")
        except HTTP_FAILURES as exc:
            raise ProviderError(
                f"OneDrive stopped answering ({exc}).", kind=Problem.PROVIDER_UNAVAILABLE
            ) from exc
        finally:
            response.close()
    return Answer(
        response.status_code, {k.lower(): v for k, v in response.headers.items()}, bytes(data)
    )


def status_problem(status: int) -> str:
    """The kind of problem an unexpected Graph status is, for the members' pages."""
    if status == 429 or status >= 500:
        return Problem.PROVIDER_UNAVAILABLE
    if status == 404:
        return Problem.FOLDER_MISSING
    return Problem.UNKNOWN


def retry_after_seconds(answer: Answer) -> float:
    """Graph's Retry-After is in seconds; without one, wait a little before asking again."""
    try:
        return max(float(answer.headers.get("retry-after", "")), 0.0)
    except ValueError:
        return 10.0


# --- OAuth 2.0 authorisation code flow with PKCE (Microsoft identity platform v2.0) ---


def pkce_pair() -> tuple[str, str]:
    """(verifier, S256 challenge) per RFC 7636."""
    verifier = secrets.token_urlsafe(48)
    digest = hashlib.sha256(verifier.encode()).digest()
    return verifier, base64.urlsafe_b64encode(digest).decode().rstrip("=")


def authorize_url(
    *, config: OneDriveConfig, state: str, code_challenge: str, redirect_uri: str
) -> str:
    query = {
        "client_id": config.client_id,
        "response_type": "code",
        "redirect_uri": redirect_uri,
        "response_mode": "query",
        "scope": config.scopes,
        "state": state,
        "code_challenge": code_challenge,
        "code_challenge_method": "S256",
    }
    return f"{config.endpoint('authorize')}?{urllib.parse.urlencode(query)}"


def _token_call(config: OneDriveConfig, form: dict[str, str]) -> Tokens:
    form = {"client_id": config.client_id, "client_secret": config.client_secret, **form}
    answer = http_request(
        "POST",
        config.endpoint("token"),
        timeout=config.timeout,
        headers={"Content-Type": "application/x-www-form-urlencoded"},
        body=urllib.parse.urlencode(form).encode(),
    )
    if answer.status == 200:
        data = answer.json()
        try:
            return Tokens(
                access_token=data["access_token"],
                # Microsoft rotates refresh tokens; keep the old one if none came back.
                refresh_token=data.get("refresh_token") or form.get("refresh_token", ""),
                expires_at=time.time() + float(data["expires_in"]),
            )
        except (KeyError, TypeError, ValueError):
            raise ProviderError("The Microsoft sign-in answer had no usable token.") from None
    code = answer.error_code()
    if code in ("invalid_grant", "interaction_required", "consent_required"):
        # Revoked consent, an expired or used refresh token, a changed password.
        raise NeedsReconnect(
            f"OneDrive access was revoked or has expired ({code}); connect the folder again."
        )
    if code in ("invalid_client", "unauthorized_client"):
        raise ProviderError("The OneDrive app registration was refused (client id or secret).")
    if answer.status in (429, 503) or answer.status >= 500:
        raise ProviderBusy(
            "Microsoft sign-in is busy.", retry_after=retry_after_seconds(answer) or 10.0
        )
    raise ProviderError(f"Microsoft sign-in refused the request ({answer.status} {code}).")


def tokens_from_code(
    *, config: OneDriveConfig, code: str, code_verifier: str, redirect_uri: str
) -> Tokens:
    return _token_call(
        config,
        {
            "grant_type": "authorization_code",
            "code": code,
            "redirect_uri": redirect_uri,
            "code_verifier": code_verifier,
            "scope": config.scopes,
        },
    )


def tokens_refreshed(*, config: OneDriveConfig, refresh_token: str) -> Tokens:
    return _token_call(
        config,
        {"grant_type": "refresh_token", "refresh_token": refresh_token, "scope": config.scopes},
    )


# A token source answers the current tokens; with `stale` it replaces those tokens
# (refreshing them, once, however many callers ask) and answers the new ones.
TokenSource = Callable[[Tokens | None], Tokens]


class GraphClient:
    """Graph calls for one connection: fresh tokens, one refresh on 401, Retry-After."""

    # 429/503 answered with a short Retry-After are waited for here, this many times.
    INLINE_RETRIES = 3

    def __init__(self, *, config: OneDriveConfig, tokens: TokenSource) -> None:
        self.config = config
        self._tokens = tokens
        self._current: Tokens | None = None

    def _token(self) -> Tokens:
        if self._current is None:
            self._current = self._tokens(None)
        if self._current.expiring(self.config.refresh_margin):
            self._current = self._tokens(self._current)
        return self._current

    def url(self, path: str) -> str:
        return f"{self.config.graph_url}{path}"

    def call(self, method: str, url: str, *, body: dict | None = None) -> Answer:
        """The answer to a Graph call; 401, 429 and 503 are dealt with here.

        Retry-After up to INLINE_WAIT_SECONDS is waited for in the
        call (a few times); a longer one raises ProviderBusy so the sync is tried again
        later instead of holding a worker.
        """
        if not url.startswith(self.config.graph_url + "/"):
            # nextLink, deltaLink and Location come from the answer: never send our token
            # anywhere but the configured Graph host.
            raise ProviderError("OneDrive pointed to a link outside Microsoft Graph.")
        refreshed = False
        waits = 0
        while True:
            token = self._token()
            headers = {
                "Authorization": f"Bearer {token.access_token}",
                "Accept": "application/json",
            }
            data = None
            if body is not None:
                headers["Content-Type"] = "application/json"
                data = json.dumps(body).encode()
            answer = http_request(
                method, url, timeout=self.config.timeout, headers=headers, body=data
            )
            if answer.status == 401 and not refreshed:
                # Expired or revoked early: refresh once, then ask again.
                self._current = self._tokens(token)
                refreshed = True
                continue
            if answer.status == 401:
                raise NeedsReconnect("OneDrive refused our access; connect the folder again.")
            if answer.status in (429, 503):
                delay = retry_after_seconds(answer)
                if delay <= self.config.inline_wait_limit and waits < self.INLINE_RETRIES:
                    waits += 1
                    time.sleep(delay)
                    continue
                raise ProviderBusy(
                    f"OneDrive asked us to slow down ({answer.status}); trying again later.",
                    retry_after=max(delay, 1.0),
                )
            return answer

    def get_json(self, url: str) -> dict[str, Any]:
        answer = self.call("GET", url)
        if answer.status != 200:
            raise ProviderError(
                f"OneDrive answered {answer.status} {answer.error_code()} for a request.",
                kind=status_problem(answer.status),
            )
        return answer.json()
