"""docs/configuration.md lists every environment variable and every command-line flag the
code has, and nothing the code no longer has.

The variables are found by scanning the installed parts' source for string constants naming
`PULSAR_*` variables (where the reads live may move; the names stay constants), the flags by
walking the parser `pulsar-lens` itself builds. A failure names what is missing or stale."""

from __future__ import annotations

import argparse
import ast
import re
import tomllib
from collections.abc import Iterator
from functools import cache
from pathlib import Path

from pulsar_lens.cli.main import build_parser

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "configuration.md"
VARIABLE = re.compile(r"PULSAR_[A-Z0-9_]+")
COMMAND_WORD = re.compile(r"[a-z][a-z-]*")
VARIABLES_SECTION = "## Every environment variable"
FLAGS_SECTION = "## Every command-line flag"


def source_dirs() -> list[Path]:
    """Every folder the wheel installs a part of `pulsar_lens` from (pyproject's mapping)."""
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    mapping = pyproject["tool"]["setuptools"]["package-dir"]
    return sorted({ROOT / folder for folder in mapping.values()})


def names_in(text: str) -> set[str]:
    """Variable names in a text; a prefix (`PULSAR_LENS_OAUTH2_`, as in `..._*` or an
    f-string's first part) names no one variable."""
    return {name for name in VARIABLE.findall(text) if not name.endswith("_")}


@cache
def code_variables() -> dict[str, str]:
    """Each variable named in a string constant of the source, with one file naming it."""
    found: dict[str, str] = {}
    for folder in source_dirs():
        for path in sorted(folder.rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
                if isinstance(node, ast.Constant) and isinstance(node.value, str):
                    for name in names_in(node.value):
                        found.setdefault(name, str(path.relative_to(ROOT)))
    return found


def section(text: str, heading: str) -> str:
    """The lines from `heading` to the next heading of the same level."""
    start = text.index(heading + "\n")
    end = text.find("\n## ", start + len(heading))
    return text[start : end if end != -1 else len(text)]


def first_cells(text: str) -> Iterator[str]:
    """The first cell of every table row of a text, header and rule rows left out."""
    for line in text.splitlines():
        if line.startswith("| ") and not line.startswith(("|---", "| variable", "| flag")):
            yield line.split("|")[1]


def documented_variables(doc: str) -> set[str]:
    return {
        name for cell in first_cells(section(doc, VARIABLES_SECTION)) for name in names_in(cell)
    }


def subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def code_flags() -> dict[tuple[str, ...], set[str]]:
    """Every option of every (sub)command, by command path; () is `pulsar-lens` itself."""
    flags: dict[tuple[str, ...], set[str]] = {}

    def walk(parser: argparse.ArgumentParser, path: tuple[str, ...]) -> None:
        options = {
            option
            for action in parser._actions
            if not isinstance(action, argparse._HelpAction)
            for option in action.option_strings
        }
        if options:
            flags[path] = options
        for name, sub in subcommands(parser).items():
            walk(sub, (*path, name))

    walk(build_parser(), ())
    return flags


def command_path(usage: str, parser: argparse.ArgumentParser) -> tuple[str, ...]:
    """`pulsar-lens drill unload` -> ("drill", "unload"), following the real subcommands and
    stopping at a placeholder (`SLUG`, `KEY...`, `assemble|start`). A lowercase word that is
    no subcommand is an error: the heading names a command that does not exist."""
    path: list[str] = []
    for word in usage.split()[1:]:
        if not COMMAND_WORD.fullmatch(word):
            break
        subs = subcommands(parser)
        assert word in subs, f"docs/configuration.md: `{usage}` names no command {word!r}"
        parser = subs[word]
        path.append(word)
    return tuple(path)


def documented_flags(doc: str) -> dict[tuple[str, ...], set[str]]:
    """The flags of each `### \\`pulsar-lens ...\\`` heading's tables; a heading naming two
    commands (`ranges` and `route`) documents its flags for both."""
    parser = build_parser()
    flags: dict[tuple[str, ...], set[str]] = {}
    for block in section(doc, FLAGS_SECTION).split("\n### ")[1:]:
        heading, _, body = block.partition("\n")
        usages = re.findall(r"`(pulsar-lens[^`]*)`", heading)
        assert usages, f"docs/configuration.md: heading {heading!r} names no command"
        options = {
            option for cell in first_cells(body) for option in re.findall(r"`(-[^`]+)`", cell)
        }
        for usage in usages:
            flags.setdefault(command_path(usage, parser), set()).update(options)
    return flags


def test_every_variable_the_code_reads_is_documented_and_no_other() -> None:
    doc = DOC.read_text()
    in_code = code_variables()
    listed = documented_variables(doc)
    problems = [
        f"{name} (named in {where}) is not in its tables"
        for name, where in sorted(in_code.items())
        if name not in listed
    ]
    problems += [
        f"{name} is named but no code reads it" for name in sorted(names_in(doc) - set(in_code))
    ]
    assert not problems, f"docs/configuration.md ({VARIABLES_SECTION}):\n" + "\n".join(problems)


def test_every_flag_of_every_command_is_documented_and_no_other() -> None:
    in_code = code_flags()
    listed = documented_flags(DOC.read_text())
    problems = []
    for path in sorted(set(in_code) | set(listed)):
        command = " ".join(("pulsar-lens", *path))
        missing = sorted(in_code.get(path, set()) - listed.get(path, set()))
        stale = sorted(listed.get(path, set()) - in_code.get(path, set()))
        if missing:
            problems.append(f"{command}: undocumented {missing}")
        if stale:
            problems.append(f"{command}: documented but gone {stale}")
    assert not problems, "docs/configuration.md (" + FLAGS_SECTION + "):\n" + "\n".join(problems)


def test_a_variable_is_found_in_any_text_and_a_prefix_is_none() -> None:
    """Names count wherever a constant holds them (a help text, an error, a tuple of names),
    so a read moved into another module is still found; a prefix is no variable."""
    assert names_in("time between polls (default PULSAR_LENS_POLL_INTERVAL or 30s)") == {
        "PULSAR_LENS_POLL_INTERVAL"
    }
    assert names_in("PULSAR_LENS_OAUTH2_") == set()
    assert names_in("`PULSAR_LENS_SPARK_*` and PULSAR_ADMIN_TOKEN_FILE") == {
        "PULSAR_ADMIN_TOKEN_FILE"
    }
    found = code_variables()
    for name in ("PULSAR_ADMIN_URL", "PULSAR_LENS_STORE", "PULSAR_LENS_SPARK_UI"):
        assert name in found, f"the source scan no longer finds {name}"
