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
                                skipped and recorded, calls in flight end at it (2m)
    PULSAR_LENS_DETAIL_BUDGET   per-topic stats calls per poll, rotated over the topics (500)
    PULSAR_LENS_MAX_BROKERS     brokers one poll makes its per-broker calls to (1000)
    PULSAR_LENS_MAX_RESPONSE    largest admin answer read, in MiB (64)
    PULSAR_LENS_TRUSTED_ORIGINS origins besides the admin URL's that may receive credentials

Durations read like `500ms`, `30s`, `2m`, `1h30m`, `7d`; a bare number means seconds.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from pulsar_lens.core.secrets import Secret
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
    "format_duration",
    "parse_duration",
    "retention_problem",
]


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
    max_brokers: int = DEFAULT_MAX_BROKERS
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
        from pulsar_lens.core.configfile import load

        return cls.from_loaded(load(environ, config=config))

    @classmethod
    def from_loaded(cls, loaded: Loaded) -> Settings:
        """Settings from what `pulsar_lens.core.config.load` validated."""
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
            max_brokers=c.max_brokers,
            clusters=c.clusters,
            config_file=loaded.file,
        )
