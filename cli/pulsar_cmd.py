"""`pulsar-lens pulsar assemble|start|stop|status`: the local Pulsar standalone, of the
release `--pulsar` names (4.0.7 by default; `runtime.RELEASES` lists the others)."""

from __future__ import annotations

import argparse
import json
import time

from pulsar_lens.cli.arguments import add_pulsar_release
from pulsar_lens.lab import runtime


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("pulsar", help="assemble, start, stop a local Pulsar standalone")
    p.add_argument("action", choices=("assemble", "start", "stop", "status"))
    p.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="extra broker setting (repeatable), e.g. activeConsumerFailoverConsistentHashing=true",
    )
    add_pulsar_release(p, also="; status: exit 1 unless the running one is this release")
    p.add_argument("--json", action="store_true", help="print the state as JSON")
    p.set_defaults(func=run)


def parse_settings(pairs: list[str]) -> dict[str, str]:
    settings = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise SystemExit(f"pulsar-lens: --set takes KEY=VALUE, got {pair!r}")
        settings[key.strip()] = value.strip()
    return settings


def run(args: argparse.Namespace) -> int:
    from pulsar_lens.lab import localpulsar  # urllib, http.client, ssl: once a command runs

    version = runtime.release(args.pulsar or runtime.PULSAR_VERSION).version
    if args.action == "assemble":
        started = time.monotonic()
        lib = runtime.ensure_runtime(version)
        state: dict[str, object] = {
            "version": version,
            "lib": str(lib),
            "seconds": round(time.monotonic() - started, 1),
        }
        if runtime.release(version).admin_tool:  # the live tests' dumps are made with it
            from pulsar_lens.lab.admintool import ensure_admin_tool

            state["admin_tool"] = str(ensure_admin_tool(version))
            state["seconds"] = round(time.monotonic() - started, 1)
    elif args.action == "start":
        started = time.monotonic()
        state = localpulsar.start_detached(parse_settings(args.set), version=version)
        state["seconds"] = round(time.monotonic() - started, 1)
    elif args.action == "stop":
        state = {"stopped": localpulsar.stop_detached()}
    else:
        state = localpulsar.status()
    if args.json:
        print(json.dumps(state))
    else:
        for key, value in state.items():
            print(f"{key}: {value}")
    if args.action != "status":
        return 0
    wanted = args.pulsar is None or state.get("version") == version
    return 0 if state.get("running") and wanted else 1
