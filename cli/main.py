"""`pulsar-lens`: the command line. Each area registers its own subcommands."""

from __future__ import annotations

import argparse
import gc
import importlib
import logging
import os
import sys
from collections.abc import Sequence

from pulsar_lens import version
from pulsar_lens.core.allocators import choose_allocators
from pulsar_lens.core.errors import PulsarLensError
from pulsar_lens.core.logs import setup_logging
from pulsar_lens.core.parts import use_charset_setting
from pulsar_lens.core.secrets import redact
from pulsar_lens.core.settings import Settings, process_environ

# Each module has register(subparsers); a subcommand's handler is args.func(args) -> int.
COMMAND_MODULES = (
    "pulsar_lens.cli.pulsar_cmd",
    "pulsar_lens.cli.plugins_cmd",
    "pulsar_lens.cli.tables_cmd",
    "pulsar_lens.cli.collect_cmd",
    "pulsar_lens.cli.assign_cmd",
    "pulsar_lens.cli.model_cmd",
    "pulsar_lens.cli.serve_cmd",
    "pulsar_lens.cli.demo_cmd",
    "pulsar_lens.cli.drill_cmd",
    "pulsar_lens.cli.config_cmd",
    "pulsar_lens.cli.devstore_cmd",
    "pulsar_lens.cli.import_cmd",
)


VERBOSE_HELP = "log at DEBUG level, and print the traceback of a plugin's failure"

# The module that registers each command: a command imports its own module only (with what
# it imports), so `pulsar-lens plugins` does not pay for the collector's imports. A test
# checks it against what the modules register.
COMMANDS = {
    "pulsar": "pulsar_lens.cli.pulsar_cmd",
    "plugins": "pulsar_lens.cli.plugins_cmd",
    "analyze": "pulsar_lens.cli.plugins_cmd",
    "tables": "pulsar_lens.cli.tables_cmd",
    "collect": "pulsar_lens.cli.collect_cmd",
    "failover": "pulsar_lens.cli.assign_cmd",
    "bundle": "pulsar_lens.cli.assign_cmd",
    "hash": "pulsar_lens.cli.model_cmd",
    "ranges": "pulsar_lens.cli.model_cmd",
    "route": "pulsar_lens.cli.model_cmd",
    "serve": "pulsar_lens.cli.serve_cmd",
    "demo": "pulsar_lens.cli.demo_cmd",
    "drill": "pulsar_lens.cli.drill_cmd",
    "config": "pulsar_lens.cli.config_cmd",
    "dev-store": "pulsar_lens.cli.devstore_cmd",
    "import": "pulsar_lens.cli.import_cmd",
}


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The parser of every command, or of `command` alone when it is a known one."""
    parser = argparse.ArgumentParser(
        prog="pulsar-lens",
        description="Operations dashboard and analyses for Apache Pulsar clusters.",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help=VERBOSE_HELP)
    parser.add_argument("--version", action=VersionAction)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    only = COMMANDS.get(command or "")
    for name in COMMAND_MODULES:
        if only is None or name == only:
            importlib.import_module(name).register(sub)
    return parser


class VersionAction(argparse.Action):
    """`--version` as argparse's own, with the version read only when it is asked for."""

    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: object) -> None:
        super().__init__(
            option_strings,
            dest=argparse.SUPPRESS,
            default=argparse.SUPPRESS,
            nargs=0,
            help="show program's version number and exit",
        )

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: object,
        option_string: str | None = None,
    ) -> None:
        print(f"pulsar-lens {version()}")
        parser.exit()


def _command(given: Sequence[str]) -> str | None:
    """The command word of the arguments (the first that is not an option), if any."""
    return next((arg for arg in given if not arg.startswith("-")), None)


def main(argv: Sequence[str] | None = None) -> int:
    given = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser(_command(given))
    for position, arg in enumerate(given, start=1):
        if not _is_utf8(arg):
            parser.error(
                f"argument {position} is not valid UTF-8 ({os.fsencode(arg)!r}); topic "
                "names, keys and consumer names are UTF-8 text"
            )
    args = parser.parse_args(given)
    try:
        choose_allocators(process_environ())  # before anything imports pyarrow
        args.settings = load_settings(args)
        levels = args.settings.logs if args.settings is not None else None
        setup_logging(levels, level=logging.DEBUG if args.verbose else None)
        if args.settings is not None:
            use_charset_setting(args.settings.jvm_charset)
        register_secrets(args.settings)
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


def load_settings(args: argparse.Namespace) -> Settings | None:
    """The settings of this process, loaded once (from the command's `--config`, if it has
    one) and handed to the command as `args.settings`; None when they are malformed: a command
    that reads them loads them again and says what is wrong."""
    try:
        return Settings.from_env(config=getattr(args, "config", None))
    except PulsarLensError:
        return None


def register_secrets(settings: Settings | None) -> None:
    """Make every credential the settings and the environment name known to redaction before
    anything runs: whatever this command prints or stores, a plugin's words included, goes
    without them. Every variable is scanned, not only the settings' (a credential of another
    tool is redacted too)."""
    from pulsar_lens.collectors.credentials import register_known_secrets

    clusters = settings.clusters if settings is not None else ()
    register_known_secrets(process_environ(), clusters)


def _is_utf8(arg: str) -> bool:
    """False for bytes the OS handed over that are not UTF-8 (surrogate-escaped by Python)."""
    try:
        arg.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def run() -> int:
    """The `pulsar-lens` process: `main()`, then a quicker way out. The heap is frozen
    before the interpreter's teardown, so its last garbage collections skip the objects every
    command leaves behind (pandas, pyarrow and the models: 0.1-0.2 s of each short command
    such as `plugins`). atexit handlers, log handlers and the flush of stdout still run, and
    objects leave by reference count as before. Not for `main()` called in-process (a test's),
    whose heap would never be collected again; for the same reason only this lets a collect
    loop freeze the heap after each stored snapshot (`collectors.heap`)."""
    from pulsar_lens.collectors.heap import allow_freezing

    allow_freezing()
    code = main()
    gc.freeze()
    return code


if __name__ == "__main__":
    sys.exit(run())
