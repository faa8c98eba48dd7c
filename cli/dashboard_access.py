"""What the Streamlit child of `serve` and `demo` is started with: the login and the log format.

With PULSAR_LENS_OIDC_* set (core.oidc), the `[auth]` secrets go to Streamlit in a private
secrets.toml named by `--secrets.files` (a path, not the secrets: argv is public), and the
variables themselves stay out of the child's environment. Streamlit's own log lines take the
one format and level of every Pulsar Lens process (core.logs).
"""

from __future__ import annotations

import importlib.util
import logging

from pulsar_lens.core.errors import SettingsError
from pulsar_lens.core.logs import FORMAT
from pulsar_lens.core.oidc import ALL_VARS, OidcSettings, write_secrets_file
from pulsar_lens.core.secrets import display_url
from pulsar_lens.core.settings import Settings

log = logging.getLogger(__name__)

ACCESS_VARS = ALL_VARS
LOOPBACK = ("127.0.0.1", "::1", "localhost")


def streamlit_args(address: str, port: int, settings: Settings) -> list[str]:
    """Streamlit options for the login of `settings` (if configured) and for logging;
    SettingsError for a malformed login setting or log level."""
    args = [
        "--logger.messageFormat",
        FORMAT,
        "--logger.level",
        logging.getLevelName(settings.logs.level).lower(),
    ]
    login = OidcSettings.resolve(settings.login, address=address, port=port)
    if login is None:
        if address not in LOOPBACK:
            log.warning(
                "the dashboard on %s:%d has no login: anyone who reaches it sees the cluster "
                "(set PULSAR_LENS_OIDC_* or put it behind a login proxy; see README, Access)",
                address or "*",
                port,
            )
        return args
    require_login_packages()
    secrets_file = write_secrets_file(login)
    log.info(
        "dashboard login through %s (client %s, callback %s)",
        display_url(login.metadata_url),
        login.client_id,
        login.redirect_uri,
    )
    return [*args, "--secrets.files", str(secrets_file)]


def require_login_packages() -> None:
    """SettingsError unless Streamlit's login can run: Authlib and an HTTP client for it
    (found, not imported: importing them here would only slow the start)."""
    has_http = any(importlib.util.find_spec(name) for name in ("httpx2", "httpx"))
    if importlib.util.find_spec("authlib") is None or not has_http:
        raise SettingsError(
            "the dashboard login (PULSAR_LENS_OIDC_*) needs Authlib and httpx: "
            "pip install 'streamlit[auth]'"
        )
