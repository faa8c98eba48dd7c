"""`pulsar-lens`: the command line. Each area registers its own subcommands."""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import sys
from collections.abc import Sequence

from pulsar_lens import __version__
from pulsar_lens.core.errors import PulsarLensError
from pulsar_lens.core.logs import setup_logging
from pulsar_lens.core.secrets import redact
from pulsar_lens.core.settings import process_environ

# Each module has register(subparsers); a subcommand's handler is args.func(args) -> int.
COMMAND_MODULES = (
    "pulsar_lens.cli.pulsar_cmd",
    "pulsar_lens.cli.plugins_cmd",
    "pulsar_lens.cli.tables_cmd",
    "pulsar_lens.cli.collect_cmd",
    "pulsar_lens.cli.assign_cmd",
    "pulsar_lens.cli.model_cmd",
    "pulsar_lens.cli.serve_cmd",
    "pulsar_lens.cli.drill_cmd",
    "pulsar_lens.cli.config_cmd",
)


VERBOSE_HELP = "log at DEBUG level, and print the traceback of a plugin's failure"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="pulsar-lens",
        description="Operations dashboard and analyses for Apache Pulsar clusters.",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help=VERBOSE_HELP)
    parser.add_argument("--version", action="version", version=f"pulsar-lens {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    given = list(sys.argv[1:] if argv is None else argv)
    for position, arg in enumerate(given, start=1):
        if not _is_utf8(arg):
            parser.error(
                f"argument {position} is not valid UTF-8 ({os.fsencode(arg)!r}); topic "
                "names, keys and consumer names are UTF-8 text"
            )
    args = parser.parse_args(given)
    try:
        setup_logging(level=logging.DEBUG if args.verbose else None)
        register_secrets()
        return int(args.func(args) or 0)
    except PulsarLensError as exc:
        print(f"pulsar-lens: {redact(str(exc))}{_traceback_hint(exc, args)}", file=sys.stderr)
        if args.verbose and exc.origin is not None and exc.origin.traceback:
            print(redact(exc.origin.traceback), file=sys.stderr, end="")
        return 2
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # the reader went away (`pulsar-lens plugins --json | head`): stop quietly, as a
        # shell tool does, without a second error when Python flushes stdout at exit
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141


def _traceback_hint(exc: PulsarLensError, args: argparse.Namespace) -> str:
    """Where the traceback of what `exc` stands for is, when it has one: printed with -v."""
    if exc.origin is None or not exc.origin.traceback or args.verbose:
        return ""
    return "; -v prints the traceback"


def register_secrets() -> None:
    """Make every credential the settings name known to redaction before anything runs:
    whatever this command prints or stores, a plugin's words included, goes without them."""
    from pulsar_lens.collectors.credentials import register_known_secrets
    from pulsar_lens.core.settings import Settings

    try:
        clusters = Settings.from_env().clusters
    except PulsarLensError:
        clusters = ()  # the command that reads the settings says what is wrong with them
    register_known_secrets(process_environ(), clusters)


def _is_utf8(arg: str) -> bool:
    """False for bytes the OS handed over that are not UTF-8 (surrogate-escaped by Python)."""
    try:
        arg.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


if __name__ == "__main__":
    sys.exit(main())
