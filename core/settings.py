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
                                skipped and recorded (2m)
    PULSAR_LENS_DETAIL_BUDGET   per-topic stats calls per poll, rotated over the topics (500)
    PULSAR_LENS_MAX_RESPONSE    largest admin answer read, in MiB (64)
    PULSAR_LENS_TRUSTED_ORIGINS origins besides the admin URL's that may receive credentials

Durations read like `500ms`, `30s`, `2m`, `1h30m`, `7d`; a bare number means seconds.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from core.secrets import Secret, display_url

if TYPE_CHECKING:
    from core.config import ClusterSettings
    from core.configfile import Loaded

DEFAULT_STORE = Path("var/store")
DEFAULT_POLL_INTERVAL = dt.timedelta(seconds=30)
DEFAULT_RETENTION = dt.timedelta(days=7)
DEFAULT_SPARK_MASTER = "local[2]"
DEFAULT_POLL_DEADLINE = dt.timedelta(minutes=2)
DEFAULT_DETAIL_BUDGET = 500
MAX_DETAIL_BUDGET = 100_000
MAX_DURATION = dt.timedelta(days=3650)
"""The longest duration a setting takes: ten years (longer is a typo, not a plan)."""
MIN_RETENTION = dt.timedelta(minutes=1)
"""Retention shorter than this would delete snapshots as they are written."""

_UNITS = {
    "ms": dt.timedelta(milliseconds=1),
    "s": dt.timedelta(seconds=1),
    "m": dt.timedelta(minutes=1),
    "h": dt.timedelta(hours=1),
    "d": dt.timedelta(days=1),
}
_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d)")
_NUMBER = re.compile(r"\d+(?:\.\d+)?")
_DURATION = re.compile(r"(?:\d+(?:\.\d+)?(?:ms|s|m|h|d))+")


def parse_duration(text: str) -> dt.timedelta:
    """`30s`, `2m`, `1h30m`, `7d`, `250ms` or a bare number of seconds, as a timedelta.

    Raises ValueError naming the accepted forms, or the limit for one longer than ten years.
    """
    value = text.strip().lower()
    if _NUMBER.fullmatch(value):
        parts = [(value, "s")]
    elif _DURATION.fullmatch(value):
        parts = _PART.findall(value)
    else:
        raise ValueError(f"{text!r} is not a duration; use e.g. 30s, 2m, 1h30m, 7d or 250ms")
    seconds = sum(float(n) * _UNITS[unit].total_seconds() for n, unit in parts)
    if seconds > MAX_DURATION.total_seconds():
        raise ValueError(f"{text!r} is longer than the limit of {MAX_DURATION.days}d")
    return dt.timedelta(seconds=seconds)


def format_duration(value: dt.timedelta) -> str:
    """The shortest `1h30m`-style spelling of a duration (milliseconds below one second)."""
    ms = round(value.total_seconds() * 1000)
    if ms < 1000:
        return f"{ms}ms"
    parts = []
    seconds, ms = divmod(ms, 1000)
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60), ("s", 1)):
        count, seconds = divmod(seconds, size)
        if count:
            parts.append(f"{count}{unit}")
    text = "".join(parts)
    return f"{text}{ms}ms" if ms else text


@dataclass(frozen=True, slots=True)
class Settings:
    """Where the clusters are, where snapshots go, how often to poll and how long to keep.

    `clusters` holds every cluster to poll (the file's `[[clusters]]`, else the one of the
    environment); `admin_url`, `service_url`, `admin_token` and `admin_token_file` repeat
    those of the only cluster, and are None when there are several.
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
    clusters: tuple[ClusterSettings, ...] = ()
    config_file: Path | None = None

    @classmethod
    def from_env(
        cls, environ: Mapping[str, str] | None = None, *, config: str | Path | None = None
    ) -> Settings:
        """Settings from environ (default os.environ) over the settings file `config` (default
        the one PULSAR_LENS_CONFIG names, if any); empty variables count as unset.

        Raises SettingsError naming the variable, or the file's line and key, of each
        malformed value.
        """
        from core.configfile import load

        return cls.from_loaded(load(environ, config=config))

    @classmethod
    def from_loaded(cls, loaded: Loaded) -> Settings:
        """Settings from what `core.config.load` validated."""
        c = loaded.config
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
            clusters=c.clusters,
            config_file=loaded.file,
        )


def admin_url_problem(url: str) -> str | None:
    """Why `url` cannot be an admin REST URL (None when it can): http(s), a host, a port."""
    shown = display_url(url) if "://" in url else url
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        return f"{shown!r} is not a valid URL ({exc})"
    if parts.scheme not in ("http", "https"):
        return f"{shown!r} must start with http:// or https://"
    if not parts.hostname:
        return f"{shown!r} has no host"
    if port == 0:
        return f"{shown!r} has port 0; give the admin port, e.g. :8080"
    return None


def retention_problem(retention: dt.timedelta, interval: dt.timedelta) -> str | None:
    """Why a retention would delete what the collector just wrote (None when it is fine)."""
    if retention < MIN_RETENTION:
        return f"must be at least {format_duration(MIN_RETENTION)}"
    if retention < interval:
        return f"must be at least the poll interval ({format_duration(interval)})"
    return None
