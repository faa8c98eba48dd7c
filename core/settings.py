"""Settings shared by the CLI, the polling loop and the dashboard, read from the environment.

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
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

from core.errors import SettingsError
from core.secrets import Secret, display_url

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
    """Where the cluster is, where snapshots go, how often to poll and how long to keep."""

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

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Settings:
        """Settings from environ (default os.environ); empty variables count as unset.

        Raises SettingsError naming the variable when a value is malformed.
        """
        env = {k: v.strip() for k, v in (os.environ if environ is None else environ).items()}

        def get(name: str) -> str | None:
            return env.get(name) or None

        token = get("PULSAR_ADMIN_TOKEN")
        token_file = get("PULSAR_ADMIN_TOKEN_FILE")
        plugin_dirs = get("PULSAR_LENS_PLUGIN_DIRS") or ""
        return cls(
            admin_url=_admin_url(get("PULSAR_ADMIN_URL")),
            service_url=_url(get("PULSAR_SERVICE_URL")),
            store_dir=Path(get("PULSAR_LENS_STORE") or DEFAULT_STORE),
            poll_interval=_positive("PULSAR_LENS_POLL_INTERVAL", get, DEFAULT_POLL_INTERVAL),
            retention=_retention(get),
            plugin_dirs=tuple(Path(p) for p in plugin_dirs.split(os.pathsep) if p.strip()),
            spark_master=get("PULSAR_LENS_SPARK_MASTER") or DEFAULT_SPARK_MASTER,
            admin_token=Secret(token) if token else None,
            admin_token_file=Path(token_file) if token_file else None,
            key_sampling=_flag("PULSAR_LENS_KEY_SAMPLING", get),
            poll_deadline=_positive("PULSAR_LENS_POLL_DEADLINE", get, DEFAULT_POLL_DEADLINE),
            detail_budget=_count("PULSAR_LENS_DETAIL_BUDGET", get, DEFAULT_DETAIL_BUDGET),
        )


def _url(value: str | None) -> str | None:
    return value.rstrip("/") if value else None


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


def _admin_url(value: str | None) -> str | None:
    url = _url(value)
    problem = admin_url_problem(url) if url else None
    if problem:
        raise SettingsError(f"PULSAR_ADMIN_URL: {problem}, e.g. http://localhost:8080")
    return url


def _flag(name: str, get: Callable[[str], str | None]) -> bool:
    text = (get(name) or "0").lower()
    if text in ("1", "true", "yes", "on"):
        return True
    if text in ("0", "false", "no", "off"):
        return False
    raise SettingsError(f"{name} must be 1 or 0 (true/false, yes/no, on/off), got {text!r}")


def retention_problem(retention: dt.timedelta, interval: dt.timedelta) -> str | None:
    """Why a retention would delete what the collector just wrote (None when it is fine)."""
    if retention < MIN_RETENTION:
        return f"must be at least {format_duration(MIN_RETENTION)}"
    if retention < interval:
        return f"must be at least the poll interval ({format_duration(interval)})"
    return None


def _retention(get: Callable[[str], str | None]) -> dt.timedelta:
    value = _positive("PULSAR_LENS_RETENTION", get, DEFAULT_RETENTION)
    interval = _positive("PULSAR_LENS_POLL_INTERVAL", get, DEFAULT_POLL_INTERVAL)
    problem = retention_problem(value, interval)
    if problem:
        shown = format_duration(value)
        raise SettingsError(
            f"PULSAR_LENS_RETENTION {problem}, got {shown}: a shorter one deletes snapshots "
            "as they are written"
        )
    return value


def _count(name: str, get: Callable[[str], str | None], default: int) -> int:
    text = get(name)
    if text is None:
        return default
    if not text.isdigit() or not 0 <= int(text) <= MAX_DETAIL_BUDGET:
        raise SettingsError(
            f"{name} must be a whole number from 0 to {MAX_DETAIL_BUDGET}, got {text!r}"
        )
    return int(text)


def _positive(name: str, get: Callable[[str], str | None], default: dt.timedelta) -> dt.timedelta:
    text = get(name)
    if text is None:
        return default
    try:
        value = parse_duration(text)
    except ValueError as exc:
        raise SettingsError(f"{name}: {exc}") from None
    if value <= dt.timedelta():
        raise SettingsError(f"{name} must be longer than zero, got {text!r}")
    return value
