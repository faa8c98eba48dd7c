"""The parts of the settings besides the clusters and the store: each a frozen dataclass, and
the rules that build it from the environment mapping `core.settings` hands over.

`core.settings.Settings.from_env` builds every part once per process, from one read of the
environment; the code that uses a part receives it as an argument. The parsers here read only
the mapping they are given, never the process environment. Variables and defaults:
docs/configuration.md.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field

from pulsar_lens.core.errors import CollectorError, SettingsError
from pulsar_lens.core.secrets import Secret, display_url, split_credentials
from pulsar_lens.core.values import DEFAULT_SPARK_MASTER, parse_duration

# -- plugin workers ---------------------------------------------------------------------------

PLUGIN_TIMEOUT_ENV = "PULSAR_LENS_PLUGIN_TIMEOUT"
PLUGIN_MEMORY_ENV = "PULSAR_LENS_PLUGIN_MEMORY"
PLUGIN_IMPORT_TIMEOUT_ENV = "PULSAR_LENS_PLUGIN_IMPORT_TIMEOUT"
DEFAULT_PLUGIN_TIMEOUT = 60.0
DEFAULT_PLUGIN_IMPORT_TIMEOUT = 10.0
DEFAULT_PLUGIN_MEMORY = 1024 * 1024 * 1024
ANALYSES_HELPER_ENV = "PULSAR_LENS_ANALYSES_HELPER"  # 0: every light analysis in-process

# -- Spark --------------------------------------------------------------------------------------

SPARK_MASTER_ENV = "PULSAR_LENS_SPARK_MASTER"
SPARK_UI_ENV = "PULSAR_LENS_SPARK_UI"
SPARK_LOG_LEVEL_ENV = "PULSAR_LENS_SPARK_LOG_LEVEL"  # Spark's own log level (ERROR by default)
SPARK_DRIVER_MEMORY_ENV = "PULSAR_LENS_SPARK_DRIVER_MEMORY"  # local mode's heap
SPARK_JAVA_OPTIONS_ENV = "PULSAR_LENS_SPARK_JAVA_OPTIONS"  # more options of the driver's JVM
SPARK_JOBS_ENV = "PULSAR_LENS_SPARK_JOBS"  # 0: the collect process starts no job worker
SPARK_EVERY_ENV = "PULSAR_LENS_SPARK_EVERY"
SPARK_JOB_TIMEOUT_ENV = "PULSAR_LENS_SPARK_JOB_TIMEOUT"
SPARK_PARTS_ENV = "PULSAR_LENS_SPARK_PARTS"  # 1: the poll's bulk answers read on Spark
DEFAULT_SPARK_EVERY = 600.0
DEFAULT_SPARK_JOB_TIMEOUT = 1800.0
DEFAULT_SPARK_LOCAL_MEMORY = "3g"
DEFAULT_SPARK_LOG_LEVEL = "ERROR"
SPARK_MASTER_PREFIXES = ("local", "spark://", "sc://", "yarn", "k8s://", "mesos://")

# -- /metrics -----------------------------------------------------------------------------------

METRICS_PORT_ENV = "PULSAR_LENS_METRICS_PORT"
METRICS_ADDRESS_ENV = "PULSAR_LENS_METRICS_ADDRESS"
METRICS_MAX_SUBSCRIPTIONS_ENV = "PULSAR_LENS_METRICS_MAX_SUBSCRIPTIONS"
EXTERNAL_URL_ENV = "PULSAR_LENS_EXTERNAL_URL"  # where users open the dashboard: alert links
DEFAULT_METRICS_ADDRESS = "127.0.0.1"
SERVE_PORT = 9464  # the default of `serve` and `demo`; `collect` has it off unless asked
DEFAULT_MAX_SUBSCRIPTIONS = 500

# -- logging, mutations, the binary client, the admin client, the JVM -------------------------

LEVEL_ENV = "PULSAR_LENS_LOG_LEVEL"
CLIENT_LEVEL_ENV = "PULSAR_LENS_CLIENT_LOG_LEVEL"
LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
ALLOW_MUTATIONS = "PULSAR_LENS_ALLOW_MUTATIONS"
DASHBOARD_MUTATIONS = "PULSAR_LENS_DASHBOARD_MUTATIONS"
TRUSTED_USER_HEADER = "PULSAR_LENS_TRUSTED_USER_HEADER"
CLIENT_TOKEN_ENV = "PULSAR_CLIENT_TOKEN"
MAX_RESPONSE_ENV = "PULSAR_LENS_MAX_RESPONSE"
MAX_MAX_RESPONSE_MIB = 4096
BULK_BYTES_PER_TOPIC = 1_700
"""Bytes of a broker's `broker-stats/topics` answer per topic it serves, the largest answer a
poll reads: 1.73 kB measured at 100,000 and 300,000 topics (`make scale`, about two consumers
a topic); a recorded 4.0 broker answers 1.0 kB for a topic with one subscription and consumer,
2.0 kB for one with two subscriptions and three consumers (docs/performance.md)."""
DEFAULT_MAX_RESPONSE = 256 * 1024 * 1024
"""At BULK_BYTES_PER_TOPIC, 64 MiB (the cap before) cut the answer of a broker serving more
than about 39,000 topics, e.g. half of a 100,000-topic cluster on two brokers, and the poll
then lost every topic of that broker. 256 MiB reads about 150,000 topics a broker; a cluster
that size needs several GiB for its poll anyway (docs/configuration.md, "Sizing for large
clusters"), so the cap still bounds what a broken server can make one call hold."""
JVM_CHARSET_ENV = "PULSAR_LENS_JVM_CHARSET"
BIND_ENV = "PULSAR_LENS_BIND_ADDRESS"  # the dashboard's bind address
DEFAULT_BIND_ADDRESS = "127.0.0.1"
_YES = {"1", "true", "yes", "on"}


def _text(environ: Mapping[str, str], name: str) -> str:
    return (environ.get(name) or "").strip()


def duration_seconds(environ: Mapping[str, str], name: str, default: float) -> float:
    """The duration in variable `name` of `environ`, in seconds; `default` when unset or
    empty. SettingsError names the variable of a malformed or non-positive value."""
    text = _text(environ, name)
    if not text:
        return default
    try:
        seconds = parse_duration(text).total_seconds()
    except ValueError as exc:
        raise SettingsError(f"{name}: {exc}") from None
    if seconds <= 0:
        raise SettingsError(f"{name} must be longer than zero, got {text!r}")
    return seconds


def _mebibytes(environ: Mapping[str, str], name: str, default: int) -> int:
    text = _text(environ, name)
    if not text:
        return default
    if not text.isdigit() or not 64 <= int(text) <= 1024 * 1024:
        raise SettingsError(f"{name} is a number of MiB from 64 to 1048576, got {text!r}")
    return int(text) * 1024 * 1024


@dataclass(frozen=True, slots=True)
class PluginLimits:
    """What a third-party plugin's worker may take: seconds per call, bytes of heap, seconds
    for its first import."""

    timeout: float = DEFAULT_PLUGIN_TIMEOUT
    memory: int = DEFAULT_PLUGIN_MEMORY
    import_timeout: float = DEFAULT_PLUGIN_IMPORT_TIMEOUT

    @classmethod
    def from_env(cls, environ: Mapping[str, str]) -> PluginLimits:
        return cls(
            timeout=duration_seconds(environ, PLUGIN_TIMEOUT_ENV, DEFAULT_PLUGIN_TIMEOUT),
            memory=_mebibytes(environ, PLUGIN_MEMORY_ENV, DEFAULT_PLUGIN_MEMORY),
            import_timeout=duration_seconds(
                environ, PLUGIN_IMPORT_TIMEOUT_ENV, DEFAULT_PLUGIN_IMPORT_TIMEOUT
            ),
        )


def spark_master(text: str) -> str:
    """A master URL any Spark accepts (`local[2]` for an empty one); SettingsError else. A
    Spark Connect token in it (`sc://host:port/;token=...`) is registered as a secret."""
    master = text.strip() or DEFAULT_SPARK_MASTER
    split_credentials(master)
    if not master.startswith(SPARK_MASTER_PREFIXES):
        raise SettingsError(
            f"{SPARK_MASTER_ENV}={display_url(master)!r}: expected local[N], spark://host:port, "
            "sc://host:port, yarn or k8s://..."
        )
    return master


@dataclass(frozen=True, slots=True)
class SparkSettings:
    """The Spark engine: the session (master, web UI, Spark's log level, local mode's heap,
    more options of the driver's JVM)
    and the job worker (started at all, how often it runs the scheduled jobs, how long one
    job may take). `every` is None when not set (the worker's default applies). `parts`: the
    collect process reads each broker's bulk answer on Spark's executors instead of in its
    own worker processes."""

    master: str = DEFAULT_SPARK_MASTER
    ui: bool = False
    log_level: str = DEFAULT_SPARK_LOG_LEVEL
    driver_memory: str = DEFAULT_SPARK_LOCAL_MEMORY
    java_options: str = ""
    jobs: bool = True
    every: float | None = None
    job_timeout: float = DEFAULT_SPARK_JOB_TIMEOUT
    parts: bool = False

    @classmethod
    def from_env(cls, environ: Mapping[str, str], *, master: str | None = None) -> SparkSettings:
        """The Spark settings of `environ`; `master` (the settings file's, already laid under
        the environment's) wins over PULSAR_LENS_SPARK_MASTER when given."""
        every = _text(environ, SPARK_EVERY_ENV)
        return cls(
            master=spark_master(master if master is not None else _text(environ, SPARK_MASTER_ENV)),
            ui=_text(environ, SPARK_UI_ENV) == "1",
            log_level=_text(environ, SPARK_LOG_LEVEL_ENV) or DEFAULT_SPARK_LOG_LEVEL,
            driver_memory=_text(environ, SPARK_DRIVER_MEMORY_ENV) or DEFAULT_SPARK_LOCAL_MEMORY,
            java_options=_text(environ, SPARK_JAVA_OPTIONS_ENV),
            jobs=environ.get(SPARK_JOBS_ENV, "1") != "0",
            every=duration_seconds(environ, SPARK_EVERY_ENV, 0.0) if every else None,
            job_timeout=duration_seconds(environ, SPARK_JOB_TIMEOUT_ENV, DEFAULT_SPARK_JOB_TIMEOUT),
            parts=_text(environ, SPARK_PARTS_ENV) == "1",
        )


def parse_port(text: str, *, name: str = METRICS_PORT_ENV) -> int:
    """A TCP port 0..65535 (0 turns /metrics off); SettingsError names the setting."""
    try:
        value = int(text.strip())
    except ValueError:
        value = -1
    if not 0 <= value <= 65535:
        raise SettingsError(
            f"{name} must be a port 0..65535 (0 turns /metrics off), got {text!r}", setting=name
        )
    return value


@dataclass(frozen=True, slots=True)
class MetricsSettings:
    """Where /metrics listens and how many subscriptions get their own series. `port_set`:
    the port came from the environment or the command line (else a command's default).
    `external_url`: where users open the dashboard (no trailing slash), served as
    `pulsar_lens_dashboard_info{url}` so that alerts and Grafana link to its pages; '' none."""

    port: int = 0
    address: str = DEFAULT_METRICS_ADDRESS
    max_subscriptions: int = DEFAULT_MAX_SUBSCRIPTIONS
    port_set: bool = field(default=False, compare=False)
    external_url: str = ""

    @classmethod
    def from_env(cls, environ: Mapping[str, str], *, port: int | None = None) -> MetricsSettings:
        """Settings from `environ`; `port` (a command-line value) wins."""
        port_text = _text(environ, METRICS_PORT_ENV)
        limit_text = _text(environ, METRICS_MAX_SUBSCRIPTIONS_ENV)
        limit = DEFAULT_MAX_SUBSCRIPTIONS
        if limit_text:
            try:
                limit = int(limit_text)
            except ValueError:
                limit = -1
            if limit < 1:
                raise SettingsError(
                    f"{METRICS_MAX_SUBSCRIPTIONS_ENV} must be a whole number >= 1, "
                    f"got {limit_text!r}",
                    setting=METRICS_MAX_SUBSCRIPTIONS_ENV,
                )
        port_set = port is not None or bool(port_text)
        if port is None:
            port = parse_port(port_text) if port_text else 0
        return cls(
            port=port,
            address=_text(environ, METRICS_ADDRESS_ENV) or DEFAULT_METRICS_ADDRESS,
            max_subscriptions=limit,
            port_set=port_set,
            external_url=parse_external_url(_text(environ, EXTERNAL_URL_ENV)),
        )

    def with_port(self, port: int | None, *, default: int) -> MetricsSettings:
        """These settings with the command-line `port` if given, else the configured one,
        else the command's `default`."""
        from dataclasses import replace

        if port is not None:
            return replace(self, port=port, port_set=True)
        return self if self.port_set else replace(self, port=default)


def parse_external_url(text: str) -> str:
    """The dashboard's address as users open it: `http(s)://host[:port][/path]`, its trailing
    `/` dropped ('' stays ''); SettingsError for anything else (a query, a fragment, blanks)."""
    from urllib.parse import urlsplit

    url = text.rstrip("/")
    if not url:
        return ""
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 -- raises ValueError for a port that is not one
    except ValueError:
        parts = None
    if (
        parts is None
        or parts.scheme not in ("http", "https")
        or not parts.hostname
        or parts.username is not None  # a metric label is no place for a password
        or parts.query
        or parts.fragment
        or url.endswith(("?", "#"))
        or any(c.isspace() or not c.isprintable() for c in url)
    ):
        raise SettingsError(
            f"{EXTERNAL_URL_ENV} must be the dashboard's http:// or https:// address "
            f"(e.g. https://lens.example.com), got {text!r}",
            setting=EXTERNAL_URL_ENV,
        )
    return url


def parse_level(text: str, *, name: str = LEVEL_ENV) -> int:
    """`INFO` (any case, surrounding blanks ignored) as `logging.INFO`; SettingsError else."""
    word = text.strip().upper()
    if word == "WARN":
        word = "WARNING"
    if word not in LEVELS:
        raise SettingsError(
            f"{name} must be one of {', '.join(LEVELS)}, got {text!r}", setting=name
        )
    level: int = logging.getLevelNamesMapping()[word]
    return level


@dataclass(frozen=True, slots=True)
class LogSettings:
    """The level of this process's log lines, and the least level of pulsar-client's own."""

    level: int = logging.INFO
    client_level: int = logging.WARNING

    @classmethod
    def from_env(cls, environ: Mapping[str, str]) -> LogSettings:
        return cls(
            level=parse_level(_text(environ, LEVEL_ENV) or "INFO"),
            client_level=parse_level(
                _text(environ, CLIENT_LEVEL_ENV) or "WARNING", name=CLIENT_LEVEL_ENV
            ),
        )


@dataclass(frozen=True, slots=True)
class MutationSettings:
    """The switches for changes to a cluster (`core.mutations` says what each allows), and
    the header a trusted login proxy names the dashboard's user in."""

    allow: bool = False
    dashboard: bool = False
    trusted_user_header: str | None = None

    @classmethod
    def from_env(cls, environ: Mapping[str, str]) -> MutationSettings:
        return cls(
            allow=_text(environ, ALLOW_MUTATIONS).lower() in _YES,
            dashboard=_text(environ, DASHBOARD_MUTATIONS).lower() in _YES,
            trusted_user_header=_text(environ, TRUSTED_USER_HEADER) or None,
        )


def client_token_of(environ: Mapping[str, str]) -> Secret | None:
    """PULSAR_CLIENT_TOKEN: the binary protocol's own token, when it differs from the admin's."""
    text = _text(environ, CLIENT_TOKEN_ENV)
    return Secret(text) if text else None


def max_response_bytes(environ: Mapping[str, str]) -> int:
    """PULSAR_LENS_MAX_RESPONSE in MiB (default 256), as bytes."""
    text = _text(environ, MAX_RESPONSE_ENV)
    if not text:
        return DEFAULT_MAX_RESPONSE
    try:
        mib = int(text)
    except ValueError:
        mib = 0
    if not 1 <= mib <= MAX_MAX_RESPONSE_MIB:
        raise CollectorError(
            f"{MAX_RESPONSE_ENV} must be a whole number of MiB from 1 to {MAX_MAX_RESPONSE_MIB}, "
            f"got {text!r}"
        )
    return mib * 1024 * 1024


_charset = ""


def use_charset_setting(setting: str) -> None:
    """Make `setting` (the settings' `jvm_charset`, PULSAR_LENS_JVM_CHARSET) the charset an
    empty `JvmCharset` param takes in this process (`core.failover`): the entry point calls it
    once, after loading the settings. The param then holds the charset, so it is in the
    result's key."""
    global _charset
    _charset = setting.strip()


def charset_setting() -> str:
    """What `use_charset_setting` was given ("" before: UTF-8)."""
    return _charset
