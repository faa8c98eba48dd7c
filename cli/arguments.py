"""Argument types shared by the commands: each refuses what it cannot take with a usage error."""

from __future__ import annotations

import argparse
import codecs
from collections.abc import Callable

from pulsar_lens.core.errors import SettingsError
from pulsar_lens.core.parts import JVM_CHARSET_ENV, charset_setting
from pulsar_lens.core.pulsarvalues import JVM_CHARSET
from pulsar_lens.core.settings import Settings


def bounded_int(flag: str, low: int, high: int) -> Callable[[str], int]:
    """An argparse type: a whole number from `low` to `high`, else a usage error naming both."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"{flag} takes {low} to {high:,}, got {value:,}")
        return value

    return parse


def bounded_float(flag: str, low: float, high: float) -> Callable[[str], float]:
    """An argparse type: a number above `low` and at most `high` (nan and inf refused), else a
    usage error naming both."""

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
        if not low < value <= high:  # false for nan too
            raise argparse.ArgumentTypeError(
                f"{flag} takes a number above {low:g} and at most {high:,g}, got {text!r}"
            )
        return value

    return parse


def charset(text: str) -> str:
    """An argparse type: a charset name Python knows (UTF-8, US-ASCII, ISO-8859-1, ...)."""
    try:
        codecs.lookup(text)
    except LookupError:
        raise argparse.ArgumentTypeError(
            f"unknown charset {text!r} (from --jvm-charset or {JVM_CHARSET_ENV})"
        ) from None
    return text


def add_jvm_charset(parser: argparse.ArgumentParser) -> None:
    """`--jvm-charset`, the one setting every model command shares for how the broker's JVM
    turns consumer names into bytes (default PULSAR_LENS_JVM_CHARSET, else UTF-8): read it
    with `jvm_charset_of(args)`."""
    parser.add_argument(
        "--jvm-charset",
        type=charset,
        metavar="NAME",
        help="the broker JVM's default charset, which hashes consumer names: US-ASCII for "
        f"Java 17 under a POSIX locale (default ${JVM_CHARSET_ENV} or UTF-8)",
    )


def jvm_charset_of(args: argparse.Namespace) -> str:
    """The `--jvm-charset` given, else the settings' (PULSAR_LENS_JVM_CHARSET, as the entry
    point handed it over), else UTF-8; SettingsError for a setting no Python knows."""
    if args.jvm_charset:
        return str(args.jvm_charset)
    try:
        return charset(charset_setting() or JVM_CHARSET)
    except argparse.ArgumentTypeError as exc:
        raise SettingsError(str(exc)) from None


def add_pulsar_release(parser: argparse.ArgumentParser, *, also: str = "") -> None:
    """`--pulsar VERSION`, the local Pulsar release a command assembles or starts: a version
    or a line of `lab.runtime.RELEASES` (an unknown one is a usage error listing them); None
    when not given, which `runtime.release()` reads as the default. `also`: what else the
    flag means for this command, appended to its help."""
    from pulsar_lens.lab import runtime  # the release table: only for commands that take it

    names = ", ".join(f"{r.version} ({r.line})" for r in runtime.RELEASES.values())
    parser.add_argument(
        "--pulsar",
        choices=runtime.version_names(),
        default=None,
        metavar="VERSION",
        help=f"the local Pulsar release, by version or line: {names} "
        f"(default {runtime.PULSAR_VERSION}){also}",
    )


def settings_of(args: argparse.Namespace) -> Settings:
    """The settings `pulsar-lens` loaded for this command (`args.settings`), else loaded now
    from its `--config` (a command run without `main`, or settings `main` found malformed:
    this raises their SettingsError)."""
    loaded = getattr(args, "settings", None)
    if isinstance(loaded, Settings):
        return loaded
    return Settings.from_env(config=getattr(args, "config", None))
