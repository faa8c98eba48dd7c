"""The image's health check: `python -m pulsar_lens.cli.healthcheck`.

Healthy (exit 0) when the dashboard answers 200 on its health path and the collect process,
when one listens, answers 200 on its /health (its polls end on time and the store takes
them); else exit 1, saying why on stdout, which `docker inspect` shows. A dashboard can be up
while polling is dead, so both are asked. The collect URL defaults to /health on
PULSAR_LENS_METRICS_PORT of 127.0.0.1 (none when that is 0). Nothing listening there is
healthy: `serve` runs a collect process only with an admin URL to poll (or a settings file's
clusters), and when that process exits it stops the dashboard too.

It imports the standard library only: it runs every 30 s beside the app.
"""

from __future__ import annotations

import argparse
import sys
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence

from pulsar_lens.core.settings import process_environ

DASHBOARD_URL = "http://127.0.0.1:8501/_stcore/health"
PORT_ENV = "PULSAR_LENS_METRICS_PORT"  # exporter.server's (a test holds them equal)
ADDRESS_ENV = "PULSAR_LENS_METRICS_ADDRESS"
HEALTH_PATH = "/health"  # cli.metrics_endpoint.HEALTH_PATH
TIMEOUT = 4.0
MAX_SHOWN = 600  # characters of an answer repeated in the check's output

_DIRECT = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # loopback: no proxy


def collect_url(environ: Mapping[str, str]) -> str | None:
    """/health of the collect process on this machine, from its metrics port and address;
    None when off."""
    text = environ.get(PORT_ENV, "").strip() or "0"
    if not text.isdigit() or int(text) == 0:
        return None
    address = environ.get(ADDRESS_ENV, "").strip()
    host = "127.0.0.1" if address in ("", "0.0.0.0", "::") else address
    host = f"[{host}]" if ":" in host else host
    return f"http://{host}:{int(text)}{HEALTH_PATH}"


def ask(url: str) -> tuple[int | None, str]:
    """(status, body) of GET `url`; (None, why) when nothing answered."""
    try:
        with _DIRECT.open(url, timeout=TIMEOUT) as answer:
            return answer.status, answer.read(MAX_SHOWN).decode("utf-8", "replace")
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read(MAX_SHOWN).decode("utf-8", "replace")
    except (OSError, urllib.error.URLError) as exc:
        return None, str(getattr(exc, "reason", exc))


def check(dashboard: str, collect: str | None) -> tuple[bool, list[str]]:
    """Whether both are healthy, and one line about each."""
    lines = []
    status, body = ask(dashboard)
    healthy = status == 200
    lines.append(f"dashboard {dashboard}: {status or 'no answer'} {body.strip()}".rstrip())
    if collect is not None:
        status, body = ask(collect)
        if status is None:
            lines.append(f"collect {collect}: not listening ({body}); nothing polls here")
        else:
            healthy = healthy and status == 200
            lines.append(f"collect {collect}: {status} {body.strip()}".rstrip())
    return healthy, lines


def main(argv: Sequence[str] | None = None, environ: Mapping[str, str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m pulsar_lens.cli.healthcheck", description=__doc__
    )
    parser.add_argument("--dashboard", default=DASHBOARD_URL, help="the dashboard's health URL")
    parser.add_argument("--collect", help=f"collect's /health URL (default from {PORT_ENV})")
    args = parser.parse_args(argv)
    env = process_environ() if environ is None else environ
    healthy, lines = check(args.dashboard, args.collect or collect_url(env))
    for line in lines:
        print(line)
    return 0 if healthy else 1


if __name__ == "__main__":
    sys.exit(main())
