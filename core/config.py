"""The settings file (TOML) beside the environment: keys, validation, where each value came from.

`load(environ, config=path)` reads the file named by `--config` or PULSAR_LENS_CONFIG (none by
default), lays the environment over it (the environment wins), validates the result with
pydantic-settings and remembers, for every key, whether it came from the file (and its line),
the environment (and the variable) or the default. Errors name the key where it was set:
`lens.toml line 7, clusters[1].admin_url: ...` or `PULSAR_LENS_RETENTION must be ...`.

Clusters: every `[[clusters]]` table of the file is one cluster. Without one, the single
cluster comes from the environment (PULSAR_ADMIN_URL, ...); with exactly one, the environment's
connection variables override its keys; with several, they apply to none (`ignored_env`).
"""

from __future__ import annotations

import datetime as dt
import os
import re
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    PlainSerializer,
    ValidationError,
    field_validator,
)
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from core.errors import SettingsError
from core.secrets import Secret, display_url
from core.settings import (
    DEFAULT_DETAIL_BUDGET,
    DEFAULT_POLL_DEADLINE,
    DEFAULT_POLL_INTERVAL,
    DEFAULT_RETENTION,
    DEFAULT_SPARK_MASTER,
    DEFAULT_STORE,
    MAX_DETAIL_BUDGET,
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
variables of the single cluster; `AdminClient.from_env` reads exactly these names."""

CLUSTER_KEYS: tuple[str, ...] = ("name", *CLUSTER_ENV)
SECRET_KEYS = frozenset({"token", "oauth2.private_key"})
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,62}")
_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off")


# -- value parsers: each raises ValueError with a phrase read after the key's name ----------


def _duration(value: Any) -> dt.timedelta:
    if isinstance(value, dt.timedelta):
        return value
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise ValueError(f"must be a duration such as 30s or 2m, got {type(value).__name__}")
    text = str(value)
    parsed = parse_duration(text)
    if parsed <= dt.timedelta():
        raise ValueError(f"must be longer than zero, got {text!r}")
    return parsed


def _flag(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    raise ValueError(f"must be 1 or 0 (true/false, yes/no, on/off), got {text!r}")


def _budget(value: Any) -> int:
    text = str(value).strip()
    if isinstance(value, bool) or not text.isdigit() or not 0 <= int(text) <= MAX_DETAIL_BUDGET:
        raise ValueError(f"must be a whole number from 0 to {MAX_DETAIL_BUDGET}, got {value!r}")
    return int(text)


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
    raise ValueError("must be a non-empty string")  # never quote a secret's value


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
        return any(v is not None for v in (self.issuer_url, self.audience, self.private_key))


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
        if value.configured and (value.issuer_url is None or value.private_key is None):
            raise ValueError("needs both issuer_url and private_key (audience and scope optional)")
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

    def connection_env(self, base: Mapping[str, str] | None = None) -> dict[str, str]:
        """The environment-style mapping `AdminClient.from_env` builds this cluster's client
        from: `base` (e.g. os.environ) without any other cluster's connection variables,
        then this cluster's. It holds secrets in clear: hand it to the client, never print it.
        """
        env = {k: v for k, v in (base or {}).items() if k not in CLUSTER_ENV.values()}
        for key, name in CLUSTER_ENV.items():
            value = self.value(key)
            if value is None or value == ():
                continue
            if isinstance(value, Secret):
                env[name] = value.reveal()
            elif isinstance(value, bool):
                env[name] = "true" if value else "false"
            elif isinstance(value, tuple):
                env[name] = ",".join(value)
            else:
                env[name] = os.fspath(value) if isinstance(value, Path) else str(value)
        return env


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
        problem = retention_problem(value, interval)
        if problem:
            raise ValueError(
                f"{problem}, got {format_duration(value)}: a shorter one deletes snapshots "
                "as they are written"
            )
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


# -- provenance -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Origin:
    """Where one value came from: `source` file / env / default, `where` the line or variable."""

    source: Literal["file", "env", "default"]
    where: str = ""

    def text(self) -> str:
        return f"{self.source} {self.where}".strip()


@dataclass(frozen=True)
class Loaded:
    """The validated settings, the file they came from, and each key's origin."""

    config: LensConfig
    file: Path | None
    origins: Mapping[str, Origin]  # "poll_interval", "clusters[0].tls.verify"
    ignored_env: tuple[str, ...] = ()  # connection variables no cluster took (several clusters)

    def origin(self, path: str) -> Origin:
        return self.origins.get(path, Origin("default"))


def load(environ: Mapping[str, str] | None = None, *, config: str | Path | None = None) -> Loaded:
    """The settings from `config` (else the file in PULSAR_LENS_CONFIG, else none) and `environ`
    (default os.environ; empty variables count as unset). SettingsError names every problem."""
    env = {k: v.strip() for k, v in (os.environ if environ is None else environ).items()}
    env = {k: v for k, v in env.items() if v}
    given = config if config is not None else env.get(CONFIG_ENV)
    path = Path(given) if given else None
    data, lines = _read_file(path, "--config" if config is not None else CONFIG_ENV)
    origins = _file_origins(data, lines, path.name) if path else {}
    raw = dict(data)
    for key, name in GLOBAL_ENV.items():
        if name in env:
            raw[key] = env[name]
            origins[key] = Origin("env", name)
    raw.setdefault("retention", DEFAULT_RETENTION)  # checked against the poll interval
    raw["clusters"], ignored = _merge_clusters(data.get("clusters"), env, origins)
    problems = _missing_admin_urls(data.get("clusters"), path, origins)
    try:
        loaded = LensConfig(**raw)
    except ValidationError as exc:
        raise SettingsError(_describe(exc, origins, path, problems)) from None
    if problems:
        raise SettingsError("\n".join(problems))
    return Loaded(loaded, path, origins, ignored)


def _read_file(path: Path | None, how: str) -> tuple[dict[str, Any], dict[str, int]]:
    if path is None:
        return {}, {}
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise SettingsError(f"{how}: cannot read the settings file {path}: {why}") from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise SettingsError(f"{path}: not valid TOML: {exc}") from None
    return data, key_lines(text)


def _file_origins(
    data: Mapping[str, Any], lines: Mapping[str, int], name: str
) -> dict[str, Origin]:
    """The origin of every table and value the file holds, at its line (else its table's)."""
    origins: dict[str, Origin] = {}

    def visit(value: Any, loc: tuple[Any, ...]) -> None:
        path = key_path(loc)
        line = next(
            (lines[p] for d in range(len(loc), 0, -1) if (p := key_path(loc[:d])) in lines), None
        )
        origins[path] = Origin("file", f"{name} line {line}" if line else name)
        if isinstance(value, dict):
            for key, item in value.items():
                visit(item, (*loc, key))
        elif isinstance(value, list) and all(isinstance(v, dict) for v in value):
            for i, item in enumerate(value):
                visit(item, (*loc, i))

    for key, value in data.items():
        visit(value, (key,))
    return origins


def _merge_clusters(
    found: Any, env: Mapping[str, str], origins: dict[str, Origin]
) -> tuple[Any, tuple[str, ...]]:
    """The clusters with the environment's connection variables laid over the only one."""
    if found is not None and not isinstance(found, list):
        return found, ()  # validation says what is wrong with it
    clusters = [dict(c) if isinstance(c, dict) else c for c in (found or [{}])]
    set_vars = {key: name for key, name in CLUSTER_ENV.items() if name in env}
    if len(clusters) > 1:
        return clusters, tuple(set_vars.values())
    only = clusters[0]
    if not isinstance(only, dict):
        return clusters, ()
    for key, name in set_vars.items():
        table, _, leaf = key.rpartition(".")
        target = only
        if table:
            sub = only.get(table)
            target = dict(sub) if isinstance(sub, dict) else {}
            only[table] = target
        target[leaf] = env[name]
        origins[f"clusters[0].{key}"] = Origin("env", name)
    return clusters, ()


def _missing_admin_urls(found: Any, path: Path | None, origins: Mapping[str, Origin]) -> list[str]:
    """A `[[clusters]]` table of the file must say where its admin API is."""
    problems = []
    for i, table in enumerate(found if isinstance(found, list) else []):
        if isinstance(table, dict) and not table.get("admin_url"):
            if f"clusters[{i}].admin_url" in origins:
                continue  # the environment gave it
            where = _where(("clusters", i), origins, path)
            problems.append(f'{where}: admin_url is missing, e.g. admin_url = "http://pulsar:8080"')
    return problems


def _describe(
    exc: ValidationError, origins: Mapping[str, Origin], path: Path | None, problems: Sequence[str]
) -> str:
    """One line per problem, each naming where the value was set."""
    lines = list(problems)
    seen: set[tuple[Any, ...]] = set()
    for error in exc.errors(include_input=False, include_url=False):
        extra = error["type"] == "extra_forbidden"
        loc = tuple(error["loc"]) if extra else _field_loc(error["loc"])
        if loc in seen:
            continue  # the other members of a union (`str | None`) say nothing new
        seen.add(loc)
        where = _where(loc, origins, path)
        if extra:
            lines.append(f"{where}: unknown key; expected one of {_known(loc)}")
            continue
        message = str(error["msg"]).removeprefix("Value error, ")
        lines.append(f"{where} {message}" if message.startswith("must ") else f"{where}: {message}")
    return "\n".join(dict.fromkeys(lines))


def _field_loc(loc: Sequence[Any]) -> tuple[Any, ...]:
    """The location up to its last key or index (pydantic appends union members)."""
    fields = {*GLOBAL_ENV, "clusters", *(p for k in CLUSTER_KEYS for p in k.split("."))}
    kept: list[Any] = []
    for part in loc:
        if not (isinstance(part, int) or part in fields):
            break
        kept.append(part)
    return tuple(kept)


def _known(loc: tuple[Any, ...]) -> str:
    if loc and loc[0] == "clusters":
        prefix = ".".join(str(p) for p in loc[2:-1])
        keys = (
            [k for k in CLUSTER_KEYS if "." not in k]
            if not prefix
            else [k.partition(".")[2] for k in CLUSTER_KEYS if k.startswith(prefix + ".")]
        )
        if not prefix:
            keys += ["tls", "oauth2"]
        return ", ".join(keys)
    return ", ".join([*GLOBAL_ENV, "clusters"])


def key_path(loc: Sequence[Any]) -> str:
    """("clusters", 1, "tls", "verify") -> "clusters[1].tls.verify"."""
    text = ""
    for part in loc:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text


def _where(loc: tuple[Any, ...], origins: Mapping[str, Origin], path: Path | None) -> str:
    """The variable that set the value, or `file line N, key.path` (the nearest known line)."""
    key = key_path(loc)
    for depth in range(len(loc), 0, -1):
        origin = origins.get(key_path(loc[:depth]))
        if origin is None:
            continue
        if origin.source == "env":
            return origin.where
        return f"{origin.where}, {key}"
    if path is not None:
        return f"{path.name}, {key}"
    return _env_name(loc) or key


def _env_name(loc: tuple[Any, ...]) -> str | None:
    """The variable of a key when no file is read (a default that another value contradicts)."""
    if loc[:2] == ("clusters", 0):
        return CLUSTER_ENV.get(".".join(str(p) for p in loc[2:]))
    return GLOBAL_ENV.get(str(loc[0])) if len(loc) == 1 else None


# -- line numbers -----------------------------------------------------------------------------

_HEADER = re.compile(r"^\s*(\[\[?)\s*([A-Za-z0-9_.\-\" ]+?)\s*\]\]?\s*(#.*)?$")
_ASSIGN = re.compile(r"^\s*([A-Za-z0-9_\-]+(?:\s*\.\s*[A-Za-z0-9_\-]+)*)\s*=")


def key_lines(text: str) -> dict[str, int]:
    """The line (1-based) of each key path the file sets (`clusters[1].tls.verify`), and of
    each `[[clusters]]` header (`clusters[1]`). Line-based: a key inside a multi-line string
    may be missed, which only costs the line number in an error."""
    lines: dict[str, int] = {}
    prefix = ""
    counts: dict[str, int] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        header = _HEADER.match(line)
        if header:
            name = header.group(2).replace(" ", "").replace('"', "")
            if header.group(1) == "[[":
                counts[name] = counts.get(name, -1) + 1
                lines.setdefault(name, number)
                prefix = f"{name}[{counts[name]}]"
                lines[prefix] = number
            else:
                head, _, rest = name.partition(".")
                prefix = f"{head}[{counts[head]}].{rest}" if head in counts and rest else name
                lines.setdefault(prefix, number)
            continue
        assign = _ASSIGN.match(line)
        if assign:
            key = re.sub(r"\s+", "", assign.group(1))
            lines.setdefault(f"{prefix}.{key}" if prefix else key, number)
    return lines


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
