"""OAuth2 client credentials as Pulsar's clients use them, and the binary client's auth.

`ClientCredentialsFlow` gets an access token from an issuer the way Pulsar's
`AuthenticationOAuth2` does: `GET {issuer}/.well-known/openid-configuration` names the token
endpoint, then `POST` `grant_type=client_credentials` with `client_id`, `client_secret` and
the optional `audience` and `scope`. The token is cached and fetched again a quarter of its
lifetime (at most a minute) before it expires; a failed fetch is remembered for a few
seconds so that a poll's many calls do not each ask the issuer again. The client secret and
every access token are `Secret`s: they never reach a log line or an error.

`collectors.client_auth` gives `pulsar.Client` the same credentials and TLS settings as the
admin client, from the same cluster settings.
"""

from __future__ import annotations

import base64
import binascii
import datetime as dt
import json
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote, unquote_to_bytes, urlsplit

import requests

from pulsar_lens.collectors.answers import (
    AnswerBroken,
    AnswerLate,
    AnswerStalled,
    AnswerTooLarge,
    read_body,
)
from pulsar_lens.collectors.transport import DeadlineAdapter, reads_by
from pulsar_lens.core.config import OAuth2Settings
from pulsar_lens.core.errors import CollectorError
from pulsar_lens.core.secretfile import SecretFileError, read_secret_file
from pulsar_lens.core.secrets import Secret, clean, display_url, forget, header_safe

log = logging.getLogger(__name__)

WELL_KNOWN = "/.well-known/openid-configuration"
FAILURE_HOLD = 5.0  # seconds a failed fetch is answered from memory
MAX_MARGIN = 60.0  # refresh at most this many seconds before expiry
DEFAULT_LIFETIME = 3600.0  # when the issuer says neither expires_in nor exp
MAX_LIFETIME = 86400.0  # a longer lifetime is taken as a day: the token is fetched daily
CREDENTIALS_HINT = "fix PULSAR_LENS_OAUTH2_PRIVATE_KEY (a JSON file with client_id, client_secret)"
ANSWER_CAP = 1024 * 1024  # an issuer's answer is a few hundred bytes


class OAuth2Error(CollectorError):
    """No access token: the issuer could not be reached, refused the client, or the
    credentials file is unreadable. `setting` names the setting to fix, `url` the issuer's
    address that failed (without credentials), `status` its HTTP status when it answered."""

    def __init__(
        self,
        message: str = "",
        *,
        setting: str | None = None,
        url: str | None = None,
        status: int | None = None,
    ) -> None:
        super().__init__(message, setting=setting, url=url)
        self.status = status


@dataclass(frozen=True, slots=True)
class Credentials:
    """What Pulsar's credentials file holds (`client_id`, `client_secret`, `issuer_url`)."""

    client_id: str
    client_secret: Secret
    issuer_url: str | None = None


def read_credentials(ref: str) -> Credentials:
    """The credentials named by `ref`: a path, a `file:///path` URL or a `data:` URL (base64
    or percent-encoded JSON), as Pulsar's `privateKey` parameter accepts."""
    try:
        if ref.startswith("data:"):
            Secret(ref)  # a data: URL carries the secret itself
            head, _, body = ref.partition(",")
            raw = base64.b64decode(body) if head.endswith(";base64") else unquote_to_bytes(body)
            where = "the data: URL"
        else:
            path = unquote(urlsplit(ref).path) if ref.startswith("file:") else ref
            where = repr(path)
            raw = read_secret_file(path)
    except SecretFileError as exc:
        why = f"cannot read the OAuth2 credentials: the file {exc}"
        raise OAuth2Error(
            f"{why}; {CREDENTIALS_HINT}", setting="PULSAR_LENS_OAUTH2_PRIVATE_KEY"
        ) from None
    except (binascii.Error, ValueError):
        why = "the OAuth2 credentials data: URL is not base64"
        raise OAuth2Error(
            f"{why}; {CREDENTIALS_HINT}", setting="PULSAR_LENS_OAUTH2_PRIVATE_KEY"
        ) from None
    try:
        data = json.loads(raw)
    except (UnicodeDecodeError, ValueError):
        data = None
    if not isinstance(data, dict) or not data.get("client_id") or not data.get("client_secret"):
        raise OAuth2Error(
            f"the OAuth2 credentials in {where} are not JSON with client_id and client_secret; "
            f"{CREDENTIALS_HINT}",
            setting="PULSAR_LENS_OAUTH2_PRIVATE_KEY",
        )
    issuer = data.get("issuer_url")
    return Credentials(
        str(data["client_id"]), Secret(str(data["client_secret"])), str(issuer) if issuer else None
    )


def jwt_claims(token: str) -> dict[str, Any]:
    """The claims of a JWT, read without checking its signature ({} when not a JWT).
    Only for hints and timing: the broker is the one that verifies."""
    parts = token.split(".")
    if len(parts) != 3:
        return {}
    try:
        payload = base64.urlsafe_b64decode(parts[1] + "=" * (-len(parts[1]) % 4))
        claims = json.loads(payload)
    except (binascii.Error, ValueError):
        return {}
    return claims if isinstance(claims, dict) else {}


def token_expired_at(token: str, *, now: float | None = None) -> dt.datetime | None:
    """When the JWT `token` expired, if its `exp` claim is past; else None."""
    exp = jwt_claims(token).get("exp")
    if not isinstance(exp, int | float):
        return None
    if exp > (time.time() if now is None else now):
        return None
    return dt.datetime.fromtimestamp(exp, dt.UTC)


class ClientCredentialsFlow:
    """Access tokens from an OAuth2 issuer by the client-credentials grant, cached.

    `issuer_url` defaults to the credentials' own; `timeout` (seconds) bounds each call to
    the issuer, answer included, and a caller's `deadline` bounds it further. `fetches` counts
    the tokens obtained. Thread-safe: one fetch at a time.
    """

    def __init__(
        self,
        credentials: Credentials,
        *,
        issuer_url: str | None = None,
        audience: str | None = None,
        scope: str | None = None,
        timeout: float = 10.0,
        verify: bool | str = True,
        clock: Callable[[], float] = time.time,
    ) -> None:
        issuer = issuer_url or credentials.issuer_url
        if not issuer:
            raise OAuth2Error(
                "no OAuth2 issuer: set PULSAR_LENS_OAUTH2_ISSUER_URL (or issuer_url in the "
                "credentials file)",
                setting="PULSAR_LENS_OAUTH2_ISSUER_URL",
            )
        self.issuer_url = issuer.rstrip("/")
        self.credentials = credentials
        self.audience = audience
        self.scope = scope
        self.timeout = timeout
        self.fetches = 0
        self._clock = clock
        self._session = requests.Session()
        self._session.mount("http://", DeadlineAdapter())
        self._session.mount("https://", DeadlineAdapter())
        self._session.verify = verify
        self._lock = threading.Lock()
        self._token: Secret | None = None
        self._refresh_at = 0.0
        self._expires_at = 0.0
        self._failure: tuple[float, OAuth2Error] | None = None
        self._endpoint: str | None = None

    def __repr__(self) -> str:
        return f"ClientCredentialsFlow({display_url(self.issuer_url)!r}, client_id=...)"

    def token(self, deadline: float | None = None) -> Secret:
        """A valid access token: the cached one, or a new one when it is due for refresh,
        fetched before `deadline` (a `time.monotonic()` value, e.g. the poll's) or not at all."""
        with self._lock:
            now = self._clock()
            if self._token is not None and now < self._refresh_at:
                return self._token
            if self._failure is not None and now < self._failure[0]:
                raise self._failure[1]
            try:
                token, lifetime, how = self._fetch(deadline)
            except OAuth2Error as exc:
                self._failure = (now + FAILURE_HOLD, exc)
                raise
            self._failure = None
            if self._token is not None and self._expires_at < now:
                forget(self._token.reveal())  # a long-expired token needs no more redaction
            self._token = token
            self._expires_at = now + lifetime
            self._refresh_at = now + lifetime - min(MAX_MARGIN, lifetime / 4)
            self.fetches += 1
            log.info("OAuth2: new access token from %s, %s", display_url(self.issuer_url), how)
            return token

    def invalidate(self) -> None:
        """Forget the cached token (the broker refused it): the next call fetches one."""
        with self._lock:
            self._refresh_at = 0.0

    def close(self) -> None:
        self._session.close()

    def _fetch(self, deadline: float | None) -> tuple[Secret, float, str]:
        endpoint = self._endpoint or self._discover(deadline)
        form = {
            "grant_type": "client_credentials",
            "client_id": self.credentials.client_id,
            "client_secret": self.credentials.client_secret.reveal(),
        }
        if self.audience:
            form["audience"] = self.audience
        if self.scope:
            form["scope"] = self.scope
        resp = self._call("POST", endpoint, deadline, data=form)
        payload = _json(resp)
        if resp.status_code >= 400 or not isinstance(payload.get("access_token"), str):
            error = payload.get("error") or f"status {resp.status_code}"
            why = clean(payload.get("error_description") or resp.text, limit=200)
            raise OAuth2Error(
                f"the OAuth2 issuer {display_url(endpoint)} gave no access token "
                f"({clean(error)}: {why}); check client_id and client_secret in "
                f"PULSAR_LENS_OAUTH2_PRIVATE_KEY, PULSAR_LENS_OAUTH2_AUDIENCE and _SCOPE",
                setting="PULSAR_LENS_OAUTH2_PRIVATE_KEY",
                url=display_url(endpoint),
                status=resp.status_code,
            )
        token = Secret(payload["access_token"])
        if not header_safe(token.reveal()):
            raise OAuth2Error(
                f"the OAuth2 issuer {display_url(endpoint)} gave an access token with characters "
                "an HTTP header cannot carry (only printable ASCII can); check the issuer",
                url=display_url(endpoint),
            )
        return (token, *self._lifetime(payload.get("expires_in"), token, endpoint))

    def _lifetime(self, expires_in: Any, token: Secret, endpoint: str) -> tuple[float, str]:
        """How long `token` lasts, by the issuer's `expires_in`, else the token's `exp`, and
        how that is known, in words for the log. An expired token is an `OAuth2Error`."""
        seconds = _seconds(expires_in)
        why = f"expires_in {clean(json.dumps(expires_in), limit=40)}"
        if seconds is None:
            exp = jwt_claims(token.reveal()).get("exp")
            if isinstance(exp, int | float) and not isinstance(exp, bool):
                seconds, why = float(exp) - self._clock(), "the token's exp claim"
            elif expires_in is None:
                return (
                    DEFAULT_LIFETIME,
                    f"the issuer said not for how long: {DEFAULT_LIFETIME:.0f}s assumed",
                )
            else:
                return (
                    DEFAULT_LIFETIME,
                    f"{why} is not a number of seconds: {DEFAULT_LIFETIME:.0f}s assumed",
                )
        if not seconds > 0:  # NaN too
            raise OAuth2Error(
                f"the OAuth2 issuer {display_url(endpoint)} gave an access token that is "
                f"already expired ({why}); check the issuer's clock and token lifetime",
                url=display_url(endpoint),
            )
        if seconds > MAX_LIFETIME:
            return MAX_LIFETIME, f"{why}, more than a day: refreshed after {MAX_LIFETIME:.0f}s"
        return seconds, f"valid {seconds:.0f}s ({why})"

    def _discover(self, deadline: float | None) -> str:
        url = self.issuer_url + WELL_KNOWN
        resp = self._call("GET", url, deadline)
        endpoint = _json(resp).get("token_endpoint")
        if resp.status_code >= 400 or not isinstance(endpoint, str):
            raise OAuth2Error(
                f"GET {display_url(url)} returned {resp.status_code} without a token_endpoint; "
                "check PULSAR_LENS_OAUTH2_ISSUER_URL",
                setting="PULSAR_LENS_OAUTH2_ISSUER_URL",
                url=display_url(url),
                status=resp.status_code,
            )
        self._endpoint = endpoint
        return endpoint

    def _call(self, method: str, url: str, deadline: float | None, **kwargs: Any) -> _Answer:
        """One call to the issuer, its whole answer read within `timeout` and `deadline`."""
        started = time.monotonic()
        end = started + self.timeout if deadline is None else min(started + self.timeout, deadline)
        where = display_url(url)
        if end <= started:
            raise OAuth2Error(
                f"no access token: the poll's deadline passed before the OAuth2 issuer at "
                f"{where} could be asked",
                url=where,
            )
        unreachable = f"cannot reach the OAuth2 issuer at {where}"
        hint = "check PULSAR_LENS_OAUTH2_ISSUER_URL"
        try:
            with reads_by(end):  # the head too: an issuer trickling it is cut off at `end`
                resp = self._session.request(
                    method,
                    url,
                    timeout=end - started,
                    verify=self._session.verify,
                    stream=True,
                    **kwargs,
                )
            body = read_body(resp, deadline=end, per_read=self.timeout, cap=ANSWER_CAP)
        except (requests.Timeout, AnswerLate, AnswerStalled):
            raise OAuth2Error(
                f"{unreachable}: no whole answer within {end - started:.1f}s; {hint}", url=where
            ) from None
        except AnswerTooLarge:
            raise OAuth2Error(
                f"the OAuth2 issuer at {where} answered with more than "
                f"{ANSWER_CAP // 1024} KiB; it was not read; {hint}",
                url=where,
            ) from None
        except AnswerBroken:
            raise OAuth2Error(
                f"{unreachable} (the connection broke mid-answer); {hint}", url=where
            ) from None
        except requests.RequestException as exc:
            raise OAuth2Error(
                f"{unreachable} ({clean(type(exc).__name__)}); {hint}", url=where
            ) from None
        return _Answer(resp.status_code, body)


@dataclass(frozen=True, slots=True)
class _Answer:
    """An issuer's answer, read whole."""

    status_code: int
    body: bytes

    @property
    def text(self) -> str:
        return self.body.decode("utf-8", errors="replace")

    def json(self) -> Any:
        return json.loads(self.body)


def _seconds(value: Any) -> float | None:
    """`expires_in` as seconds: a JSON number, or digits in a string (some issuers send
    one); None for anything else (absent, a boolean, words)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value) if value == value else None  # NaN says nothing
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        return float(value.strip())
    return None


def _json(resp: _Answer) -> dict[str, Any]:
    try:
        payload = resp.json()
    except ValueError:
        return {}
    return payload if isinstance(payload, dict) else {}


def flow_from_settings(
    oauth2: OAuth2Settings, *, verify: bool | str = True
) -> ClientCredentialsFlow | None:
    """The OAuth2 flow a cluster's `oauth2` settings describe; None without a private key."""
    if oauth2.private_key is None:
        return None
    return ClientCredentialsFlow(
        read_credentials(oauth2.private_key.reveal()),
        issuer_url=oauth2.issuer_url,
        audience=oauth2.audience,
        scope=oauth2.scope,
        verify=verify,
    )
