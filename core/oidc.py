"""Dashboard login through an OpenID Connect provider, configured by environment.

    PULSAR_LENS_OIDC_METADATA_URL   the provider's discovery document, e.g.
                                    https://idp.example.com/.well-known/openid-configuration
    PULSAR_LENS_OIDC_CLIENT_ID      the dashboard's client id at the provider
    PULSAR_LENS_OIDC_CLIENT_SECRET  its client secret (never printed)
    PULSAR_LENS_OIDC_REDIRECT_URI   the dashboard's public URL + /oauth2callback (default: the
                                    bind address and port, when that is not a wildcard)
    PULSAR_LENS_OIDC_COOKIE_SECRET  signs the login cookie (default: random at each start, so
                                    a restart logs everyone out)

None of the first three set: no login, and the dashboard says that it is open. Some of them
set: a SettingsError names the missing ones. Streamlit's own login (`st.login`) reads these
as the `[auth]` table of a secrets.toml; `write_secrets_file()` writes that file, readable
by this user only, into a private folder removed at exit.
"""

from __future__ import annotations

import atexit
import os
import secrets
import shutil
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

from pulsar_lens.core.errors import SettingProblem, SettingsError
from pulsar_lens.core.secrets import Secret

METADATA_ENV = "PULSAR_LENS_OIDC_METADATA_URL"
CLIENT_ID_ENV = "PULSAR_LENS_OIDC_CLIENT_ID"
CLIENT_SECRET_ENV = "PULSAR_LENS_OIDC_CLIENT_SECRET"
REDIRECT_ENV = "PULSAR_LENS_OIDC_REDIRECT_URI"
COOKIE_SECRET_ENV = "PULSAR_LENS_OIDC_COOKIE_SECRET"
REQUIRED = (METADATA_ENV, CLIENT_ID_ENV, CLIENT_SECRET_ENV)
ALL_VARS = (*REQUIRED, REDIRECT_ENV, COOKIE_SECRET_ENV)
CALLBACK_PATH = "/oauth2callback"  # Streamlit's fixed callback route
MIN_COOKIE_SECRET = 16
WILDCARDS = ("0.0.0.0", "::", "")


@dataclass(frozen=True, slots=True)
class LoginValues:
    """The login's variables as set (stripped; "" when unset), before they are checked
    against where the dashboard listens: the part of the settings `OidcSettings` comes from."""

    metadata_url: str = ""
    client_id: str = ""
    client_secret: Secret | None = field(default=None, repr=False)
    redirect_uri: str = ""
    cookie_secret: Secret | None = field(default=None, repr=False)

    @classmethod
    def from_env(cls, environ: Mapping[str, str]) -> LoginValues:
        values = {name: (environ.get(name) or "").strip() for name in ALL_VARS}
        secret, cookie = values[CLIENT_SECRET_ENV], values[COOKIE_SECRET_ENV]
        return cls(
            metadata_url=values[METADATA_ENV],
            client_id=values[CLIENT_ID_ENV],
            client_secret=Secret(secret) if secret else None,
            redirect_uri=values[REDIRECT_ENV],
            cookie_secret=Secret(cookie) if cookie else None,
        )


@dataclass(frozen=True, slots=True)
class OidcSettings:
    """What Streamlit's `[auth]` section needs; the two secrets never show themselves."""

    metadata_url: str
    client_id: str
    client_secret: Secret
    redirect_uri: str
    cookie_secret: Secret

    @classmethod
    def from_env(
        cls, environ: Mapping[str, str], *, address: str = "", port: int = 0
    ) -> OidcSettings | None:
        """`resolve` over the login variables of `environ`."""
        return cls.resolve(LoginValues.from_env(environ), address=address, port=port)

    @classmethod
    def resolve(
        cls, values: LoginValues, *, address: str = "", port: int = 0
    ) -> OidcSettings | None:
        """The login settings, or None when none is set; `address` and `port` (where the
        dashboard listens) give the default redirect URI. Raises SettingsError naming the
        variable that is missing or malformed."""
        given = {
            METADATA_ENV: values.metadata_url,
            CLIENT_ID_ENV: values.client_id,
            CLIENT_SECRET_ENV: values.client_secret,
        }
        missing = [name for name in REQUIRED if not given[name]]
        if len(missing) == len(REQUIRED):
            return None
        if missing:
            raise SettingsError(
                f"a dashboard login needs {', '.join(REQUIRED)}; {', '.join(missing)} "
                "missing (or unset them all to serve the dashboard without a login)",
                problems=[SettingProblem("missing", setting=name) for name in missing],
            )
        assert values.client_secret is not None  # not missing
        metadata = _http_url(METADATA_ENV, values.metadata_url)
        redirect = values.redirect_uri or _default_redirect(address, port)
        _http_url(REDIRECT_ENV, redirect)
        if not urlsplit(redirect).path.endswith(CALLBACK_PATH):
            raise SettingsError(
                f"{REDIRECT_ENV} must end with {CALLBACK_PATH}, got {redirect!r}",
                setting=REDIRECT_ENV,
            )
        cookie = values.cookie_secret
        if cookie is not None and len(cookie.reveal()) < MIN_COOKIE_SECRET:
            raise SettingsError(
                f"{COOKIE_SECRET_ENV} must be at least {MIN_COOKIE_SECRET} characters",
                setting=COOKIE_SECRET_ENV,
            )
        return cls(
            metadata_url=metadata,
            client_id=values.client_id,
            client_secret=values.client_secret,
            redirect_uri=redirect,
            cookie_secret=cookie or Secret(secrets.token_urlsafe(32)),
        )

    def to_toml(self) -> str:
        """The secrets.toml text Streamlit reads: an `[auth]` table. Holds both secrets."""
        auth = {
            "redirect_uri": self.redirect_uri,
            "cookie_secret": self.cookie_secret.reveal(),
            "client_id": self.client_id,
            "client_secret": self.client_secret.reveal(),
            "server_metadata_url": self.metadata_url,
        }
        lines = [f"{key} = {toml_string(value)}" for key, value in auth.items()]
        return "\n".join(["[auth]", *lines, ""])


def toml_string(value: str) -> str:
    """`value` as a TOML basic string: quotes, backslashes and control characters escaped."""
    escaped = []
    for char in value:
        code = ord(char)
        if char in '"\\':
            escaped.append("\\" + char)
        elif code < 0x20 or code == 0x7F:
            escaped.append(f"\\u{code:04x}")
        else:
            escaped.append(char)
    return '"' + "".join(escaped) + '"'


def _http_url(name: str, value: str) -> str:
    parts = urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise SettingsError(f"{name} must be an absolute http(s) URL, got {value!r}", setting=name)
    return value


def _default_redirect(address: str, port: int) -> str:
    if address in WILDCARDS or not port:
        raise SettingsError(
            f"{REDIRECT_ENV} is needed when the dashboard listens on every address: set it "
            f"to the URL users open plus {CALLBACK_PATH}, e.g. "
            f"https://lens.example.com{CALLBACK_PATH}",
            setting=REDIRECT_ENV,
        )
    host = f"[{address}]" if ":" in address else address
    return f"http://{host}:{port}{CALLBACK_PATH}"


def write_secrets_file(settings: OidcSettings, *, folder: Path | None = None) -> Path:
    """Write `settings` as secrets.toml, mode 0600, in `folder` (default: a new private
    temporary folder, mode 0700, removed when this process exits); return its path."""
    if folder is None:
        folder = Path(tempfile.mkdtemp(prefix="pulsar-lens-auth-"))
        atexit.register(shutil.rmtree, folder, ignore_errors=True)
    path = folder / "secrets.toml"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as out:
        out.write(settings.to_toml())
    return path
