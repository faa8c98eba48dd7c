"""Settings shared by the CLI, the polling loop and the dashboard: the environment, over the
optional settings file PULSAR_LENS_CONFIG (TOML; `core.configfile` reads it, docs/configuration.md
lists every key). The environment variables:

    PULSAR_LENS_CONFIG          the settings file (none by default)

    PULSAR_ADMIN_URL            admin REST base URL, e.g. http://pulsar:8080 (no default)
    PULSAR_SERVICE_URL          binary protocol URL, e.g. pulsar://pulsar:6650 (no default)
    PULSAR_ADMIN_TOKEN          token for the admin API (never printed)
    PULSAR_ADMIN_TOKEN_FILE     file holding that token
    PULSAR_LENS_STORE           snapshot store folder (./var/store)
    PULSAR_LENS_POLL_INTERVAL   time between polls (30s)
    PULSAR_LENS_RETENTION       age after which stored snapshots are deleted (7d)
    PULSAR_LENS_PLUGIN_DIRS     folders of drop-in plugin files, separated by os.pathsep
    PULSAR_LENS_SPARK_MASTER    Spark master URL (local[2])
    PULSAR_LENS_KEY_SAMPLING    1 to sample message keys while collecting (off: it reads data)
    PULSAR_LENS_POLL_DEADLINE   the longest one poll may take; calls not started by then are
                                skipped and recorded, calls in flight end at it (2m, or
                                the poll interval when that is longer)
    PULSAR_LENS_DETAIL_BUDGET   per-topic stats calls per poll, rotated over the topics (500)
    PULSAR_LENS_MAX_BROKERS     brokers one poll makes its per-broker calls to (1000)
    PULSAR_LENS_MAX_RESPONSE    largest admin answer read, in MiB (256)
    PULSAR_LENS_TRUSTED_ORIGINS origins besides the admin URL's that may receive credentials

Durations read like `500ms`, `30s`, `2m`, `1h30m`, `7d`; a bare number means seconds.

This module is the only one that reads or writes the process environment (a test fails when
another does). `Settings.from_env` reads it once, with the settings file, into typed parts
(`core.parts`: the plugin limits, Spark, /metrics, logging, mutations, the dashboard's
login, ...); each part is checked then, and a malformed one raises its SettingsError where
it is used, so a command that needs none of it runs. An entry point (a `pulsar-lens`
command, the dashboard script, the Spark job worker) loads the settings and hands each callee
the part it needs. `child_environ` renders what a child process starts with, credentials
left out unless asked for: secrets reach a child by its environment, never by its command
line, and the child loads its settings from it.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import os
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, TypeVar

from pulsar_lens.core.errors import PulsarLensError
from pulsar_lens.core.oidc import LoginValues
from pulsar_lens.core.parts import (
    ANALYSES_HELPER_ENV,
    BIND_ENV,
    DEFAULT_BIND_ADDRESS,
    DEFAULT_MAX_RESPONSE,
    JVM_CHARSET_ENV,
    LogSettings,
    MetricsSettings,
    MutationSettings,
    PluginLimits,
    SparkSettings,
    client_token_of,
    duration_seconds,
    max_response_bytes,
)
from pulsar_lens.core.secrets import Secret, is_credential_var, without_credentials
from pulsar_lens.core.values import (
    DEFAULT_DETAIL_BUDGET,
    DEFAULT_MAX_BROKERS,
    DEFAULT_POLL_DEADLINE,
    DEFAULT_POLL_INTERVAL,
    DEFAULT_RETENTION,
    DEFAULT_SPARK_MASTER,
    DEFAULT_STORE,
    MAX_DETAIL_BUDGET,
    MAX_DURATION,
    MIN_RETENTION,
    admin_url_problem,
    format_duration,
    parse_duration,
    retention_problem,
)

if TYPE_CHECKING:
    from pulsar_lens.core.config import ClusterSettings
    from pulsar_lens.core.configfile import Loaded

T = TypeVar("T")

# callers import the rules of the values from here too
__all__ = [
    "DEFAULT_DETAIL_BUDGET",
    "DEFAULT_POLL_DEADLINE",
    "DEFAULT_POLL_INTERVAL",
    "DEFAULT_RETENTION",
    "DEFAULT_SPARK_MASTER",
    "DEFAULT_STORE",
    "MAX_DETAIL_BUDGET",
    "MAX_DURATION",
    "MIN_RETENTION",
    "Settings",
    "admin_url_problem",
    "child_environ",
    "duration_seconds",
    "format_duration",
    "parse_duration",
    "process_environ",
    "retention_problem",
]


@dataclass(frozen=True, slots=True)
class Settings:
    """Where the clusters are, where snapshots go, how often to poll and how long to keep.

    `clusters` holds every cluster to poll (the file's `[[clusters]]`, else the one of the
    environment); `admin_url`, `service_url`, `admin_token` and `admin_token_file` repeat
    those of the only cluster, and are None when there are several. The other parts: the
    binary client's own token (PULSAR_CLIENT_TOKEN), the broker JVM's charset, the dashboard's
    bind address and login, and, through properties that raise a malformed variable's
    SettingsError where they are read, the plugin limits, Spark, /metrics, the log levels,
    the mutation switches and the largest admin answer read. `loaded` is what the file and
    the environment gave, with each key's origin (for `config check`).
    """

    admin_url: str | None = None
    service_url: str | None = None
    store_dir: Path = DEFAULT_STORE
    poll_interval: dt.timedelta = DEFAULT_POLL_INTERVAL
    retention: dt.timedelta = DEFAULT_RETENTION
    plugin_dirs: tuple[Path, ...] = ()
    spark_master: str = DEFAULT_SPARK_MASTER
    admin_token: Secret | None = field(default=None, repr=False)
    admin_token_file: Path | None = None
    key_sampling: bool = False
    poll_deadline: dt.timedelta = DEFAULT_POLL_DEADLINE
    detail_budget: int = DEFAULT_DETAIL_BUDGET
    max_brokers: int = DEFAULT_MAX_BROKERS
    clusters: tuple[ClusterSettings, ...] = ()
    config_file: Path | None = None
    client_token: Secret | None = field(default=None, repr=False)
    jvm_charset: str = ""
    bind_address: str = DEFAULT_BIND_ADDRESS
    login: LoginValues = field(default_factory=LoginValues)
    analyses_helper: bool = True  # a long results pass may put part of it in a helper process
    loaded: Loaded | None = field(default=None, repr=False, compare=False)
    # the parts a malformed variable may spoil: read through the properties below, which raise
    # that variable's error where the part is used
    _plugin_limits: PluginLimits | Problem = field(default_factory=PluginLimits)
    _spark: SparkSettings | Problem = field(default_factory=SparkSettings)
    _metrics: MetricsSettings | Problem = field(default_factory=MetricsSettings)
    _logs: LogSettings | Problem = field(default_factory=LogSettings)
    _mutations: MutationSettings | Problem = field(default_factory=MutationSettings)
    _max_response: int | Problem = DEFAULT_MAX_RESPONSE

    @classmethod
    def from_env(
        cls, environ: Mapping[str, str] | None = None, *, config: str | Path | None = None
    ) -> Settings:
        """Settings from environ (default os.environ) over the settings file `config` (default
        the one PULSAR_LENS_CONFIG names, if any); empty variables count as unset.

        Raises SettingsError naming the variable, or the file's line and key, of each
        malformed value of the clusters, the store and the polls; a malformed value of another
        part raises where that part is used.
        """
        from pulsar_lens.core.configfile import load

        env = process_environ() if environ is None else environ
        return cls.from_loaded(load(env, config=config), env)

    @classmethod
    def current(cls) -> Settings:
        """`from_env()` of this process, kept while the environment and the settings file (its
        path, size and modification time) stay as they were: a long-lived process whose code
        runs anew on every interaction (the dashboard's page script) reads them once, not at
        every call. Malformed settings raise SettingsError at every call (nothing is kept)."""
        from pulsar_lens.core.config import CONFIG_ENV

        env = process_environ()
        key = (tuple(sorted(env.items())), _file_stamp(env.get(CONFIG_ENV, "").strip()))
        with _current_lock:
            kept = _current.get(key)
        if kept is not None:
            return kept
        built = cls.from_env(env)
        with _current_lock:
            _current.clear()  # only the newest is kept
            _current[key] = built
        return built

    @classmethod
    def from_loaded(cls, loaded: Loaded, environ: Mapping[str, str] | None = None) -> Settings:
        """Settings from what `pulsar_lens.core.config.load` validated, with the parts of
        `environ` (the mapping it was loaded from; none: the parts' defaults)."""
        c = loaded.config
        env: Mapping[str, str] = environ or {}
        only = c.clusters[0] if len(c.clusters) == 1 else None
        return cls(
            admin_url=only.admin_url if only else None,
            service_url=only.service_url if only else None,
            store_dir=c.store,
            poll_interval=c.poll_interval,
            retention=c.retention,
            plugin_dirs=c.plugin_dirs,
            spark_master=c.spark_master,
            admin_token=only.token if only else None,
            admin_token_file=only.token_file if only else None,
            key_sampling=c.key_sampling,
            poll_deadline=c.poll_deadline,
            detail_budget=c.detail_budget,
            max_brokers=c.max_brokers,
            clusters=c.clusters,
            config_file=loaded.file,
            client_token=client_token_of(env),
            jvm_charset=(env.get(JVM_CHARSET_ENV) or "").strip(),
            bind_address=(env.get(BIND_ENV) or "").strip() or DEFAULT_BIND_ADDRESS,
            login=LoginValues.from_env(env),
            analyses_helper=(env.get(ANALYSES_HELPER_ENV) or "").strip() != "0",
            loaded=loaded,
            _plugin_limits=_checked(PluginLimits.from_env, env),
            _spark=_checked(lambda e: SparkSettings.from_env(e, master=c.spark_master), env),
            _metrics=_checked(MetricsSettings.from_env, env),
            _logs=_checked(LogSettings.from_env, env),
            _mutations=_checked(MutationSettings.from_env, env),
            _max_response=_checked(max_response_bytes, env),
        )

    def poll_deadline_at(self, interval: dt.timedelta) -> dt.timedelta:
        """The deadline of each poll made every `interval`: the one set (variable or file),
        else the longer of the default (2m) and `interval`.

        A poll's calls take 0.2 to 0.3 ms a topic (docs/performance.md), so 2m cut the
        answers of a cluster of about 400,000 topics or more, whose poll and analyses need an
        interval of 10 minutes or more anyway: a poll may now take its whole interval, and
        one that takes longer is told as an overrun."""
        if self.loaded is not None:
            given = self.loaded.origin("poll_deadline").source != "default"
        else:
            given = self.poll_deadline != DEFAULT_POLL_DEADLINE
        return self.poll_deadline if given else max(self.poll_deadline, interval)

    @property
    def plugin_limits(self) -> PluginLimits:
        """The limits of a third-party plugin's worker process."""
        return _ok(self._plugin_limits)

    @property
    def spark(self) -> SparkSettings:
        """The Spark session's and the job worker's settings."""
        return _ok(self._spark)

    @property
    def metrics(self) -> MetricsSettings:
        """Where /metrics listens (port 0: not at all, unless a command says otherwise)."""
        return _ok(self._metrics)

    @property
    def logs(self) -> LogSettings:
        """The log levels."""
        return _ok(self._logs)

    @property
    def mutations(self) -> MutationSettings:
        """The switches for changes to a cluster."""
        return _ok(self._mutations)

    @property
    def max_response(self) -> int:
        """The largest admin answer read, in bytes."""
        return _ok(self._max_response)

    @property
    def cluster(self) -> ClusterSettings:
        """The only cluster (the one of the environment when the file lists none); a
        cluster without settings when there are several."""
        from pulsar_lens.core.config import ClusterSettings

        return self.clusters[0] if len(self.clusters) == 1 else ClusterSettings()

    def file_environ(self) -> dict[str, str]:
        """What a child process started without credentials and without the settings file
        (it may hold credentials, so children never get it) needs of the settings: the Spark
        master, as the variable that child reads it from, always (a Spark Connect master's
        `;token=` makes it a credential variable, kept from children otherwise: the job
        worker's plugins run on that session), and the file's plugin folders."""
        from pulsar_lens.core.config import GLOBAL_ENV

        env = {GLOBAL_ENV["spark_master"]: self.spark_master}
        if self.config_file is None:
            return env
        if self.plugin_dirs:
            env[GLOBAL_ENV["plugin_dirs"]] = os.pathsep.join(map(str, self.plugin_dirs))
        return env


_current_lock = threading.Lock()
_current: dict[object, Settings] = {}  # the newest `Settings.current()`, by what it read


def _file_stamp(name: str) -> tuple[str, int, int] | None:
    """What says a settings file changed: its path, modification time and size."""
    if not name:
        return None
    try:
        st = Path(name).stat()
    except OSError:
        return (name, -1, -1)  # from_env says what is wrong with it
    return (name, st.st_mtime_ns, st.st_size)


@dataclass(frozen=True, slots=True)
class Problem:
    """Why a part of the settings could not be built: raised where the part is used."""

    error: PulsarLensError


def _checked(parse: Callable[[Mapping[str, str]], T], environ: Mapping[str, str]) -> T | Problem:
    try:
        return parse(environ)
    except PulsarLensError as exc:
        return Problem(exc)


def _ok(part: T | Problem) -> T:
    if isinstance(part, Problem):
        raise part.error
    return part


# -- the process environment: read and written here only ------------------------------------


def process_environ() -> Mapping[str, str]:
    """A read-only copy of this process's environment, as it is now: what `Settings.from_env`
    builds the settings from. Only entry points call it (a test holds the list)."""
    return MappingProxyType(dict(os.environ))


def child_environ(
    *, credentials: bool, add: Mapping[str, str] | None = None, drop: Iterable[str] = ()
) -> dict[str, str]:
    """The environment a child process starts with: this process's, without any credential
    variable unless `credentials`, without `drop`, with `add` laid over."""
    env = dict(os.environ)
    if not credentials:
        env = without_credentials(env)
    for name in drop:
        env.pop(name, None)
    env.update(add or {})
    return env


def export(values: Mapping[str, str]) -> None:
    """Set variables not set yet in this process's own environment, for libraries that read
    them there when they start a process of their own (PySpark's JVM and Python workers)."""
    for name, value in values.items():
        os.environ.setdefault(name, value)


def drop_credentials() -> None:
    """Remove every credential variable from this process's environment: a plugin worker
    runs someone else's code, which must find none there."""
    for name, value in list(os.environ.items()):
        if is_credential_var(name, value):
            del os.environ[name]


@contextlib.contextmanager
def without_credentials_while(add: Mapping[str, str]) -> Iterator[None]:
    """The environment a child started meanwhile inherits, without credentials and with `add`
    laid over, restored after: for a child that cannot be given one (multiprocessing's
    forkserver), so neither its `os.environ` nor /proc/<pid>/environ holds a credential.

    Only the process's C environment changes (`os.unsetenv`, `os.putenv`), which is what a
    child started without an explicit environment inherits; `os.environ` stays as it is,
    since other threads read it meanwhile: requests walks it for proxy settings at every
    call, and a key taken out from under that walk made a poll fail with a KeyError."""
    current = dict(os.environ)
    touched = [n for n, v in current.items() if is_credential_var(n, v)]
    for name in touched:
        os.unsetenv(name)
    for name, value in add.items():
        os.putenv(name, value)
    touched += list(add)
    try:
        yield
    finally:  # back to what os.environ says now (another thread may have set a name since)
        for name in touched:
            now = os.environ.get(name)
            if now is None:
                os.unsetenv(name)
            else:
                os.putenv(name, now)
