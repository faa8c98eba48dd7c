"""`pulsar-lens config check`: the effective settings, where each came from, and whether every
cluster answers.

Prints each key with its value (secrets as `****`, URLs without credentials) and its origin:
the settings file and line, the environment variable, or the default. Then asks each cluster's
admin API GET /admin/v2/clusters and GET /admin/v2/brokers/{cluster} with that cluster's own
credentials. Exit status: 0 when every cluster answered, 1 when one did not, 2 for settings
that do not validate.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from pulsar_lens.cli.arguments import bounded_float, settings_of
from pulsar_lens.cli.collect_cmd import add_config_arg
from pulsar_lens.core.errors import PulsarLensError
from pulsar_lens.core.parts import DEFAULT_MAX_RESPONSE
from pulsar_lens.core.secrets import clean

if TYPE_CHECKING:  # the settings file's models (pydantic) load once the command runs
    from pulsar_lens.core.config import ClusterSettings
    from pulsar_lens.core.configfile import Loaded

DEFAULT_TIMEOUT = 10.0


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("config", help="show the effective settings and test each cluster")
    actions = p.add_subparsers(dest="config_command", required=True, metavar="ACTION")
    check = actions.add_parser(
        "check",
        help="print the settings and where each came from; test every cluster's admin API",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_config_arg(check)
    check.add_argument("--json", action="store_true", help="print one JSON document")
    check.add_argument(
        "--timeout",
        type=bounded_float("--timeout", 0.0, 300.0),
        default=DEFAULT_TIMEOUT,
        metavar="SECONDS",
        help=f"per admin call ({DEFAULT_TIMEOUT:g})",
    )
    check.add_argument(
        "--no-connect", action="store_true", help="only validate and print the settings"
    )
    check.set_defaults(func=run_check)


def run_check(args: argparse.Namespace) -> int:
    settings = settings_of(args)
    loaded = settings.loaded
    assert loaded is not None  # Settings.from_env keeps what it loaded
    checks: list[dict[str, Any] | None] = [
        None
        if args.no_connect
        else check_cluster(c, timeout=args.timeout, max_response=settings.max_response)
        for c in loaded.config.clusters
    ]
    report = describe(loaded, checks)
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        print_report(report)
    return 0 if report["ok"] else 1


def describe(loaded: Loaded, checks: list[dict[str, Any] | None]) -> dict[str, Any]:
    """The report: every key's shown value and origin, each cluster's check."""
    from pulsar_lens.core.config import CLUSTER_ENV, CLUSTER_KEYS, GLOBAL_ENV, SECRET_KEYS

    config = loaded.config
    settings = {
        key: _entry(getattr(config, key), loaded, key, secret=False, env=GLOBAL_ENV[key])
        for key in GLOBAL_ENV
    }
    clusters = []
    for i, (cluster, check) in enumerate(zip(config.clusters, checks, strict=True)):
        keys = {
            key: _entry(
                cluster.value(key),
                loaded,
                f"clusters[{i}].{key}",
                secret=key in SECRET_KEYS,
                env=CLUSTER_ENV.get(key) if len(config.clusters) == 1 else None,
            )
            for key in CLUSTER_KEYS
        }
        clusters.append({"name": cluster.label, "settings": keys, "check": check})
    ok = all(c is None or c["ok"] for c in checks)
    return {
        "file": os.fspath(loaded.file) if loaded.file else None,
        "ok": ok,
        "settings": settings,
        "clusters": clusters,
        "ignored_env": list(loaded.ignored_env),
    }


def _entry(value: Any, loaded: Loaded, path: str, *, secret: bool, env: str | None) -> Any:
    from pulsar_lens.core.config import show

    origin = loaded.origin(path)
    return {
        "value": show(value, secret=secret),
        "source": origin.source,
        "where": origin.where or None,
        "env": env,
    }


def check_cluster(
    cluster: ClusterSettings, *, timeout: float, max_response: int = DEFAULT_MAX_RESPONSE
) -> dict[str, Any]:
    """Ask the cluster's admin API who it is and which brokers it has, with its credentials."""
    from pulsar_lens.collectors.admin import AdminClient
    from pulsar_lens.collectors.brokers import collect_broker_ids, collect_clusters

    started = time.monotonic()
    calls: list[str] = []
    result: dict[str, Any] = {"ok": False, "clusters": [], "brokers": {}, "calls": calls}
    if cluster.admin_url is None:
        result["error"] = "no admin URL; set PULSAR_ADMIN_URL or admin_url in the settings file"
        return result
    try:
        with AdminClient.from_settings(
            cluster, max_response_bytes=max_response, timeout=timeout, retries=0
        ) as client:
            calls.append("GET /admin/v2/clusters")
            names = collect_clusters(client, timeout=timeout)
            result["clusters"] = names
            for name in names:
                calls.append(f"GET /admin/v2/brokers/{name}")
                result["brokers"][name] = collect_broker_ids(client, name, timeout=timeout)
    except PulsarLensError as exc:
        result["error"] = clean(str(exc))
    else:
        result["ok"] = bool(names)
        if not names:
            result["error"] = "GET /admin/v2/clusters listed no cluster"
    result["seconds"] = round(time.monotonic() - started, 3)
    return result


def print_report(report: Mapping[str, Any]) -> None:
    file = report["file"] or "none (pass --config or set PULSAR_LENS_CONFIG)"
    print(f"settings file: {file}")
    _print_keys(report["settings"])
    for cluster in report["clusters"]:
        print(f"\ncluster {cluster['name']}")
        _print_keys(cluster["settings"])
        check = cluster["check"]
        if check is not None:
            print(f"  {'connection':<20} {_check_text(check)}")
    if report["ignored_env"]:
        names = ", ".join(report["ignored_env"])
        print(
            f"\nignored: {names} (the settings file lists several clusters; give each its "
            "keys in its [[clusters]] table)"
        )
    print("\nok" if report["ok"] else "\nFAILED: a cluster did not answer (see connection)")


def _print_keys(keys: Mapping[str, Mapping[str, Any]]) -> None:
    for key, entry in keys.items():
        value = entry["value"]
        text = "-" if value is None or value == [] else json.dumps(value).strip('"')
        origin = entry["source"] + (f" {entry['where']}" if entry["where"] else "")
        print(f"  {key:<20} {text:<40} {origin}")


def _check_text(check: Mapping[str, Any]) -> str:
    if not check["ok"]:
        return f"FAILED: {check.get('error')}"
    brokers = "; ".join(
        f"{name}: {len(ids)} broker(s) {', '.join(ids)}" for name, ids in check["brokers"].items()
    )
    return f"ok in {check['seconds']:g}s ({brokers})"
