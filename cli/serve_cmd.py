"""`pulsar-lens serve`: the polling loop and the dashboard (`pulsar-lens demo` runs it over a
local Pulsar of its own, cli/demo_cmd.py).

It runs two child processes under one supervisor, sharing the store: `pulsar-lens collect`
and `streamlit run dashboard/app.py`. Either one exiting stops the other and exits non-zero
with its last output; Ctrl-C or SIGTERM stops everything cleanly.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import sys
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path

from pulsar_lens.cli.arguments import bounded_int, settings_of
from pulsar_lens.cli.collect_cmd import add_config_arg, duration_arg, require_admin_url
from pulsar_lens.cli.dashboard_access import ACCESS_VARS, streamlit_args
from pulsar_lens.cli.metrics_endpoint import (
    MetricsEndpoint,
    add_metrics_port,
    metrics_port,
    metrics_url,
)
from pulsar_lens.cli.supervisor import (
    Child,
    ChildFailed,
    say,
    stop_signals,
    supervise,
    wait_http_ok,
)
from pulsar_lens.core.parts import BIND_ENV, SERVE_PORT
from pulsar_lens.core.secrets import display_url
from pulsar_lens.core.settings import Settings, child_environ, format_duration
from pulsar_lens.core.storeroot import check_root

APP = Path(__file__).resolve().parent.parent / "dashboard" / "app.py"
DEFAULT_PORT = 8501
READY_TIMEOUT = 90.0
SECRET_VARS = (
    "PULSAR_ADMIN_TOKEN",
    "PULSAR_ADMIN_TOKEN_FILE",
    "PULSAR_CLIENT_TOKEN",
    "PULSAR_CLIENT_TOKEN_FILE",
    "PULSAR_ADMIN_URL",  # may carry user:password@; the dashboard reads only the store
    "PULSAR_LENS_CONFIG",  # may hold tokens; what the dashboard needs goes by variable
    "PULSAR_LENS_OAUTH2_PRIVATE_KEY",
    "PULSAR_LENS_SPARK_MASTER",  # a Spark Connect `;token=`; the job worker runs the Spark jobs
)


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    s = sub.add_parser("serve", help="run the polling loop and the dashboard side by side")
    s.add_argument("--admin-url", help="admin REST URL (default PULSAR_ADMIN_URL)")
    add_config_arg(s)
    add_common(s, store_help="store folder (default PULSAR_LENS_STORE)")
    s.set_defaults(func=run_serve)


def add_common(p: argparse.ArgumentParser, *, store_help: str) -> None:
    """The flags `serve` and `demo` share: store, dashboard port and address, interval,
    metrics port."""
    p.add_argument("--store", metavar="DIR", help=store_help)
    p.add_argument(
        "--port",
        type=bounded_int("--port", 1, 65535),
        default=DEFAULT_PORT,
        help="dashboard port (8501)",
    )
    p.add_argument(
        "--address",
        default=None,
        help=f"dashboard bind address (default {BIND_ENV} or 127.0.0.1)",
    )
    p.add_argument(
        "--interval",
        type=duration_arg,
        help="time between polls, e.g. 10s (default PULSAR_LENS_POLL_INTERVAL or 30s)",
    )
    add_metrics_port(p, default_text=str(SERVE_PORT))


def collect_child(
    admin_url: str | None,
    store: Path,
    interval: dt.timedelta,
    *,
    metrics: int = 0,
    extra: Sequence[str] = (),
    config: Path | None = None,
    add: Mapping[str, str] | None = None,
) -> Child:
    """The collect process: of `admin_url`, or of every cluster of the settings file `config`;
    `add`: variables laid over this process's for it."""
    argv = [
        sys.executable,
        "-m",
        "pulsar_lens.cli.main",
        "collect",
        "--store",
        str(store),
        "--interval",
        format_duration(interval),
        "--metrics-port",
        str(metrics),
        *(("--config", str(config)) if config is not None else ()),
        *extra,
    ]
    # the URL goes by environment, not argv: it may carry a password, and argv is public (ps)
    env = _child_env(store, interval, add)
    if admin_url is not None:
        env["PULSAR_ADMIN_URL"] = admin_url
    return Child("collect", argv, env=env)


def streamlit_child(
    store: Path,
    interval: dt.timedelta,
    *,
    address: str,
    port: int,
    settings: Settings,
    add: Mapping[str, str] | None = None,
) -> Child:
    """The dashboard process, with the login and log level of `settings`; when they come
    from a settings file, the keys it reads (plugin folders, Spark master) go to it by
    variable, never the file and its secrets; `add`: variables laid over this process's for
    it."""
    argv = [
        sys.executable,
        "-m",
        "streamlit",
        "run",
        str(APP),
        "--server.address",
        address,
        "--server.port",
        str(port),
        "--server.headless",
        "true",
        "--server.fileWatcherType",
        "none",
        "--browser.gatherUsageStats",
        "false",
        "--global.developmentMode",
        "false",
        "--client.toolbarMode",
        "minimal",  # no "Deploy" button: this is an operations tool, not a hosted app
        *streamlit_args(address, port, settings),  # the login, if configured, and the logs
    ]
    file_keys = {k: v for k, v in settings.file_environ().items() if k not in SECRET_VARS}
    # the dashboard reads only the store: it needs no credentials (the login's go by file)
    env = _child_env(
        store, interval, {**(add or {}), **file_keys}, drop=(*SECRET_VARS, *ACCESS_VARS)
    )
    return Child("dashboard", argv, env=env)


def _child_env(
    store: Path,
    interval: dt.timedelta,
    add: Mapping[str, str] | None = None,
    *,
    drop: Sequence[str] = (),
) -> dict[str, str]:
    own = {
        "PULSAR_LENS_STORE": str(store),
        "PULSAR_LENS_POLL_INTERVAL": format_duration(interval),
        "PYTHONUNBUFFERED": "1",
    }
    return child_environ(credentials=True, add={**(add or {}), **own}, drop=drop)


def dashboard_url(address: str, port: int) -> str:
    host = "127.0.0.1" if address in ("0.0.0.0", "::", "") else address
    return f"http://{host}:{port}"


def serve(
    admin_url: str | None,
    store: Path,
    interval: dt.timedelta,
    *,
    address: str,
    port: int,
    banner: Sequence[str] = (),
    stop: threading.Event | None = None,
    metrics: int = 0,
    collect_args: Sequence[str] = (),
    settings: Settings,
    child_env: Mapping[str, str] | None = None,
) -> int:
    """Supervise the loop and the dashboard until stopped; 1 (with the reason) if one dies.
    Without an admin URL only the dashboard runs, over the store as it is (offline), unless
    `settings` come from a file that lists several clusters: the loop then polls them all.
    `child_env`: variables both children get beyond this process's."""
    url = dashboard_url(address, port)
    children = [
        streamlit_child(
            store, interval, address=address, port=port, settings=settings, add=child_env
        )
    ]
    config = settings.config_file
    polls = admin_url is not None or bool(config and len(settings.clusters) > 1)
    check_root(store, writable=polls)  # before any child starts: one line, not two tracebacks
    store.mkdir(parents=True, exist_ok=True)
    if polls:
        collector = collect_child(
            admin_url,
            store,
            interval,
            metrics=metrics,
            extra=collect_args,
            config=config,
            add=child_env,
        )
        children.insert(0, collector)
    offline = None if polls else offline_metrics(store, metrics, settings)
    stop = stop or threading.Event()

    def ready() -> None:
        wait_http_ok(f"{url}/_stcore/health", timeout=READY_TIMEOUT, children=children, stop=stop)
        if not stop.is_set():  # while the children's lines are echoed: whole lines only
            say(f"Pulsar Lens dashboard: {url}")
            if metrics:
                say(f"Prometheus metrics: {metrics_url(metrics, settings.metrics)}")
            for line in banner:
                say(line)
            say("Press Ctrl-C to stop.")

    with stop_signals(stop):
        try:
            supervise(children, stop=stop, ready=ready)
        except ChildFailed as exc:
            print(f"pulsar-lens: {exc}", file=sys.stderr, flush=True)
            return 1
        finally:
            if offline is not None:
                offline.close()
    return 0


def offline_metrics(store: Path, port: int, settings: Settings) -> MetricsEndpoint | None:
    """/metrics over the store as it is, served from this process: offline there is no
    collect process to serve it (`collect --metrics-port` does while polling). The stored
    polls' families, the plugins' included, are computed at the first scrape."""
    if not port:
        return None
    from pulsar_lens.core.store import Store

    endpoint = MetricsEndpoint(
        Store(store),
        dataclasses.replace(settings.metrics, port=port),
        plugin_dirs=settings.plugin_dirs,
        plugin_limits=settings.plugin_limits,
        follows_analyses=False,  # no results pass here
    )
    endpoint.start()
    return endpoint


def run_serve(args: argparse.Namespace) -> int:
    settings = settings_of(args)
    store = check_root(Path(args.store or settings.store_dir), writable=False).resolve()
    if len(settings.clusters) > 1 and not args.admin_url:
        names = ", ".join(str(c.name) for c in settings.clusters)
        banner = [f"Collecting from {len(settings.clusters)} clusters ({names}) into {store}"]
        admin_url = None
    elif not (args.admin_url or settings.admin_url) and _has_snapshots(store):
        banner = [f"Browsing {store} offline: no admin URL is set, so nothing is polled"]
        admin_url = None
    else:
        admin_url = require_admin_url("serve", args.admin_url, settings)
        if not admin_url:
            print(
                f"pulsar-lens serve: or point --store at a store with snapshots to browse it "
                f"offline ({store} has none)",
                file=sys.stderr,
            )
            return 2
        banner = [f"Collecting from {display_url(admin_url)} into {store}"]
    return serve(
        admin_url,
        store,
        args.interval or settings.poll_interval,
        address=args.address or settings.bind_address,
        port=args.port,
        banner=banner,
        metrics=metrics_port(args.metrics_port, default=SERVE_PORT, settings=settings.metrics),
        settings=settings,
    )


def _has_snapshots(store: Path) -> bool:
    from pulsar_lens.core.store import Store

    try:
        return Store(store).latest_snapshot_id() is not None
    except Exception:  # an unreadable store is no store to browse
        return False
