"""Credentials kept in files: the admin token file, read the same way by the admin client, the
OAuth2 flow's token fallback and the binary-protocol clients; and `register_known_secrets`,
which makes every credential the settings name known to `core.secrets.redact` at start."""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from pulsar_lens.core.errors import CollectorError, PulsarLensError
from pulsar_lens.core.secretfile import SecretFileError, read_secret_file
from pulsar_lens.core.secrets import register, split_credentials

if TYPE_CHECKING:
    from pulsar_lens.core.config import ClusterSettings

log = logging.getLogger(__name__)

TOKEN_FILE_ENV = "PULSAR_ADMIN_TOKEN_FILE"
OAUTH2_KEY_ENV = "PULSAR_LENS_OAUTH2_PRIVATE_KEY"
# variables whose value is itself a secret (a *_FILE variable names where one is)
_SECRET_VALUE = re.compile(r"TOKEN|SECRET|PASSW|API_?KEY")


def read_token_file(path: str | os.PathLike[str], *, setting: str = TOKEN_FILE_ENV) -> str:
    """The token stored in `path`, stripped; a clear error (never the content) if unreadable,
    not a regular file or larger than a credential can be."""
    shown = f"the admin token file {os.fspath(path)!r}"
    try:
        raw = read_secret_file(path)
    except SecretFileError as exc:
        raise CollectorError(f"{shown} {exc}; fix {setting}", setting=setting) from None
    try:
        token = raw.decode("utf-8").strip()
    except UnicodeDecodeError:
        raise CollectorError(
            f"{shown} is not UTF-8 text (a binary file?); it must hold the token itself, "
            f"e.g. the output of `pulsar tokens create`; fix {setting}",
            setting=setting,
        ) from None
    if not token:
        raise CollectorError(f"{shown} is empty; fix {setting}", setting=setting)
    return token


def register_known_secrets(
    environ: Mapping[str, str], clusters: Sequence[ClusterSettings] = ()
) -> None:
    """Register with `core.secrets` every credential the environment and `clusters` name:
    tokens, the content of token files, OAuth2 client secrets, URL passwords and URL
    queries. A file that cannot be read is skipped here: the part that uses it says why."""
    refs: list[tuple[str, str]] = []
    for name, value in environ.items():
        value = value.strip()
        if not value:
            continue
        if "://" in value and (name.startswith("PULSAR") or "@" in value):
            split_credentials(value)  # registers a password and the query's values
        if _SECRET_VALUE.search(name.upper()) and not name.upper().endswith("_FILE"):
            register(value)
        if name in (TOKEN_FILE_ENV, OAUTH2_KEY_ENV):
            refs.append((name, value))
    for cluster in clusters:
        for url in (cluster.admin_url, cluster.service_url, cluster.oauth2.issuer_url):
            if url:
                split_credentials(url)
        refs.append((TOKEN_FILE_ENV, os.fspath(cluster.token_file or "")))
        key = cluster.oauth2.private_key
        refs.append((OAUTH2_KEY_ENV, key.reveal() if key is not None else ""))
    for name, ref in refs:
        if ref:
            _register_file(name, ref)


def _register_file(name: str, ref: str) -> None:
    try:
        if name == TOKEN_FILE_ENV:
            register(read_token_file(ref))
        else:
            # imported here: it brings `requests`, which most commands never need
            from pulsar_lens.collectors.oauth2 import read_credentials

            read_credentials(ref)  # its client secret is a Secret: registered as it is read
    except PulsarLensError as exc:
        log.debug("%s not read for redaction: %s", name, exc)
