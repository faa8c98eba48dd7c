"""The settings' keys and their validation: the top level, `[[clusters]]`, TLS and OAuth2.

`LensConfig` (pydantic-settings) validates every setting; `ClusterSettings` is one cluster,
what `AdminClient.from_settings` and the binary client (`collectors.client_auth`) connect with.
`core.configfile.load()` reads the file and the environment into them. Keys, variables and
defaults: docs/configuration.md.
"""

from __future__ import annotations

import datetime as dt
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    PlainSerializer,
    field_validator,
)
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from pulsar_lens.core.errors import RuleBroken
from pulsar_lens.core.secrets import Secret, display_url
from pulsar_lens.core.values import (
    DEFAULT_DETAIL_BUDGET,
    DEFAULT_MAX_BROKERS,
    DEFAULT_POLL_DEADLINE,
    DEFAULT_POLL_INTERVAL,
    DEFAULT_RETENTION,
    DEFAULT_SPARK_MASTER,
    DEFAULT_STORE,
    MAX_DETAIL_BUDGET,
    MAX_MAX_BROKERS,
    admin_url_problem,
    format_duration,
    parse_duration,
    retention_problem,
)

CONFIG_ENV = "PULSAR_LENS_CONFIG"
MASKED = "****"

GLOBAL_ENV: Mapping[str, str] = {
    "store": "PULSAR_LENS_STORE",
    "poll_interval": "PULSAR_LENS_POLL_INTERVAL",
    "retention": "PULSAR_LENS_RETENTION",
    "plugin_dirs": "PULSAR_LENS_PLUGIN_DIRS",
    "spark_master": "PULSAR_LENS_SPARK_MASTER",
    "key_sampling": "PULSAR_LENS_KEY_SAMPLING",
    "poll_deadline": "PULSAR_LENS_POLL_DEADLINE",
    "detail_budget": "PULSAR_LENS_DETAIL_BUDGET",
    "max_brokers": "PULSAR_LENS_MAX_BROKERS",
}
"""Keys of the file's top level and the variables that override them."""

CLUSTER_ENV: Mapping[str, str] = {
    "admin_url": "PULSAR_ADMIN_URL",
    "service_url": "PULSAR_SERVICE_URL",
    "token": "PULSAR_ADMIN_TOKEN",
    "token_file": "PULSAR_ADMIN_TOKEN_FILE",
    "trusted_origins": "PULSAR_LENS_TRUSTED_ORIGINS",
    "tls.ca_bundle": "PULSAR_LENS_CA_BUNDLE",
    "tls.verify": "PULSAR_LENS_TLS_VERIFY",
    "tls.cert_file": "PULSAR_LENS_TLS_CERT_FILE",
    "tls.key_file": "PULSAR_LENS_TLS_KEY_FILE",
    "oauth2.issuer_url": "PULSAR_LENS_OAUTH2_ISSUER_URL",
    "oauth2.audience": "PULSAR_LENS_OAUTH2_AUDIENCE",
    "oauth2.private_key": "PULSAR_LENS_OAUTH2_PRIVATE_KEY",
    "oauth2.scope": "PULSAR_LENS_OAUTH2_SCOPE",
}
"""Keys of a `[[clusters]]` table (dotted: in its `tls` / `oauth2` sub-table) and the
variables of the single cluster."""

CLUSTER_KEYS: tuple[str, ...] = ("name", *CLUSTER_ENV)
SECRET_KEYS = frozenset({"token", "oauth2.private_key"})
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,62}")
_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off")


# -- value parsers: each raises RuleBroken, the rule read right after the key's name, or a
# ValueError whose message is a sentence of its own (parse_duration's, the admin URL's) ------


def _duration(value: Any) -> dt.timedelta:
    if isinstance(value, dt.timedelta):
        return value
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise RuleBroken(f"must be a duration such as 30s or 2m, got {type(value).__name__}")
    text = str(value)
    parsed = parse_duration(text)
    if parsed <= dt.timedelta():
        raise RuleBroken(f"must be longer than zero, got {text!r}")
    return parsed


def _flag(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    raise RuleBroken(f"must be 1 or 0 (true/false, yes/no, on/off), got {text!r}")


def _whole(value: Any, low: int, high: int) -> int:
    text = str(value).strip()
    if isinstance(value, bool) or not text.isdigit() or not low <= int(text) <= high:
        raise RuleBroken(f"must be a whole number from {low} to {high}, got {value!r}")
    return int(text)


def _budget(value: Any) -> int:
    return _whole(value, 0, MAX_DETAIL_BUDGET)


def _max_brokers(value: Any) -> int:
    return _whole(value, 1, MAX_MAX_BROKERS)


def _url(value: Any) -> Any:
    return value.strip().rstrip("/") or None if isinstance(value, str) else value


def _admin_url(value: Any) -> Any:
    url = _url(value)
    if isinstance(url, str):
        problem = admin_url_problem(url)
        if problem:
            raise ValueError(f"{problem}, e.g. http://localhost:8080")
    return url


def _secret(value: Any) -> Any:
    if isinstance(value, Secret):
        return value
    if isinstance(value, str) and value.strip():
        return Secret(value)
    raise RuleBroken("must be a non-empty string")  # never quote a secret's value


def _words(value: Any) -> Any:
    if isinstance(value, str):
        return tuple(w.strip() for w in value.split(",") if w.strip())
    return value


def _paths(value: Any) -> Any:
    if isinstance(value, str):
        return tuple(Path(p) for p in value.split(os.pathsep) if p.strip())
    return value


Duration = Annotated[dt.timedelta, BeforeValidator(_duration)]
Flag = Annotated[bool, BeforeValidator(_flag)]
SecretValue = Annotated[
    Secret | None,
    BeforeValidator(_secret),
    PlainSerializer(lambda v: None if v is None else MASKED),  # a dump never reveals it
]


class _Table(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, arbitrary_types_allowed=True)


class TlsSettings(_Table):
    """TLS towards the admin API: CA bundle, verification, client certificate."""

    ca_bundle: Path | None = None
    verify: Flag = True
    cert_file: Path | None = None
    key_file: Path | None = None


class OAuth2Settings(_Table):
    """OAuth2 client credentials (Pulsar's AuthenticationOAuth2 parameters)."""

    issuer_url: Annotated[str | None, BeforeValidator(_url)] = None
    audience: str | None = None
    private_key: SecretValue = None
    scope: str | None = None

    @property
    def configured(self) -> bool:
        keys = (self.issuer_url, self.audience, self.private_key, self.scope)
        return any(v is not None for v in keys)


class ClusterSettings(_Table):
    """One cluster: its name, where its admin API and brokers are, and how to authenticate."""

    name: str | None = None
    admin_url: Annotated[str | None, BeforeValidator(_admin_url)] = None
    service_url: Annotated[str | None, BeforeValidator(_url)] = None
    token: SecretValue = None
    token_file: Path | None = None
    trusted_origins: Annotated[tuple[str, ...], BeforeValidator(_words)] = ()
    tls: TlsSettings = TlsSettings()
    oauth2: OAuth2Settings = OAuth2Settings()

    @field_validator("name")
    @classmethod
    def _check_name(cls, value: str | None) -> str | None:
        if value is not None and not _NAME.fullmatch(value):
            raise ValueError(
                f"{value!r} is not a cluster name: use letters, digits, '.', '_' and '-' "
                "(at most 63, starting with a letter or digit)"
            )
        return value

    @field_validator("oauth2")
    @classmethod
    def _check_oauth2(cls, value: OAuth2Settings) -> OAuth2Settings:
        if value.configured and value.private_key is None:
            raise ValueError(
                "needs private_key (PULSAR_LENS_OAUTH2_PRIVATE_KEY), the credentials file "
                "(issuer_url defaults to the one in that file; audience and scope are optional)"
            )
        return value

    @property
    def label(self) -> str:
        """The name, else the admin URL without credentials, else `(no admin URL)`."""
        if self.name:
            return self.name
        return display_url(self.admin_url) if self.admin_url else "(no admin URL)"

    def value(self, key: str) -> Any:
        """The value of a dotted key of CLUSTER_KEYS (`tls.verify`)."""
        target: Any = self
        for part in key.split("."):
            target = getattr(target, part)
        return target


class LensConfig(BaseSettings):
    """Every setting, validated; built by `load()` from the merged file and environment."""

    model_config = SettingsConfigDict(
        extra="forbid", frozen=True, arbitrary_types_allowed=True, validate_default=False
    )

    store: Path = DEFAULT_STORE
    poll_interval: Duration = DEFAULT_POLL_INTERVAL
    retention: Duration = DEFAULT_RETENTION
    plugin_dirs: Annotated[tuple[Path, ...], BeforeValidator(_paths)] = ()
    spark_master: str = DEFAULT_SPARK_MASTER
    key_sampling: Flag = False
    poll_deadline: Duration = DEFAULT_POLL_DEADLINE
    detail_budget: Annotated[int, BeforeValidator(_budget)] = DEFAULT_DETAIL_BUDGET
    max_brokers: Annotated[int, BeforeValidator(_max_brokers)] = DEFAULT_MAX_BROKERS
    clusters: tuple[ClusterSettings, ...] = ()

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        # load() merges the file and the environment itself, to know where each value came from
        return (init_settings,)

    @field_validator("retention")
    @classmethod
    def _check_retention(cls, value: dt.timedelta, info: Any) -> dt.timedelta:
        interval = info.data.get("poll_interval", dt.timedelta())
        broken = retention_problem(value, interval)
        if broken is not None:
            raise broken
        return value

    @field_validator("clusters")
    @classmethod
    def _check_names(cls, value: tuple[ClusterSettings, ...]) -> tuple[ClusterSettings, ...]:
        if len(value) > 1:
            unnamed = [i for i, c in enumerate(value) if not c.name]
            if unnamed:
                raise ValueError(
                    f"with several clusters each needs a name; clusters[{unnamed[0]}] has none"
                )
            names = [c.name for c in value]
            twice = sorted({n for n in names if names.count(n) > 1 and n})
            if twice:
                raise ValueError(f"two clusters are named {twice[0]!r}; names must be unique")
        return value


def show(value: Any, *, secret: bool = False) -> Any:
    """A value as `config check` prints it: secrets `****`, URLs without credentials."""
    if value is None:
        return None
    if secret or isinstance(value, Secret):
        return MASKED
    if isinstance(value, dt.timedelta):
        return format_duration(value)
    if isinstance(value, Path):
        return os.fspath(value)
    if isinstance(value, tuple):
        return [show(v) for v in value]
    if isinstance(value, str) and "://" in value:
        return display_url(value)
    return value
