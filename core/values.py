"""The defaults of the settings and the rules of their values, shared by the environment reader
(`core.settings`) and the settings file (`core.config`): durations, the admin URL, retention.

Durations read like `500ms`, `30s`, `2m`, `1h30m`, `7d`; a bare number means seconds.
"""

from __future__ import annotations

import datetime as dt
import re
from pathlib import Path
from urllib.parse import urlsplit

from pulsar_lens.core.errors import RuleBroken
from pulsar_lens.core.secrets import display_url

DEFAULT_STORE = Path("var/store")
DEFAULT_POLL_INTERVAL = dt.timedelta(seconds=30)
DEFAULT_RETENTION = dt.timedelta(days=7)
DEFAULT_SPARK_MASTER = "local[2]"
DEFAULT_POLL_DEADLINE = dt.timedelta(minutes=2)
DEFAULT_DETAIL_BUDGET = 500
MAX_DETAIL_BUDGET = 100_000
DEFAULT_MAX_BROKERS = 1_000
"""Brokers one poll makes its per-broker calls to (four each). The largest Pulsar clusters
run a few hundred brokers; 1,000 leaves room for those while 4,000 calls at the default
concurrency still fit the default deadline when each answers in about 0.2 s."""
MAX_MAX_BROKERS = 100_000
MAX_DURATION = dt.timedelta(days=3650)
"""The longest duration a setting takes: ten years (longer is a typo, not a plan)."""
DEFAULT_MAX_TOPICS = 10
"""Topics one key sampling round reads at most (`collectors.sampling`)."""
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


def retention_problem(retention: dt.timedelta, interval: dt.timedelta) -> RuleBroken | None:
    """The rule a retention breaks when it would delete what the collector just wrote (None
    when it is fine), said after the setting's name: "must be at least 1m, got 30s: ..."."""
    if retention < MIN_RETENTION:
        rule = f"must be at least {format_duration(MIN_RETENTION)}"
    elif retention < interval:
        rule = f"must be at least the poll interval ({format_duration(interval)})"
    else:
        return None
    return RuleBroken(
        f"{rule}, got {format_duration(retention)}: a shorter one deletes snapshots "
        "as they are written"
    )


ENGINES: tuple[str, ...] = ("light", "spark")
"""The engines a plugin may declare (re-exported by `pulsar_lens.api`). A `spark` plugin runs
as a job in the job worker's process (`plugins.spark.worker`) or in `pulsar-lens analyze`,
never in a page request; it is refused at load time where pyspark is not installed."""
