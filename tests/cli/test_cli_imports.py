"""Parsing a command line imports the standard library and pulsar_lens only.

`pulsar-lens --help`, `--version`, `<command> --help` for every command and sub-command, and an
argument error end before a command runs: none of them may import the data stack (pandas,
pyarrow, numpy), Spark, the dashboard's (streamlit, altair), the settings file's models
(pydantic), the admin client's (requests) or the exporter's (prometheus_client). Each would
add a tenth of a second or more to every start, and the test suite starts the command hundreds
of times. A command's `register()` imports argparse-level helpers; what runs the command is
imported by the function that runs it. The same holds for the image's health check, which runs
every 30 s beside the app.

The modules are read from `sys.modules` in a child interpreter (the test process has them all),
less those a bare interpreter starts with (a site hook's).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from collections.abc import Iterator

from pulsar_lens.cli.main import build_parser

# Third-party packages parsing must not load; every one is avoidable (none is needed to build
# a parser or to print help), so the list has no exceptions per command.
HEAVY = (
    "pandas",
    "pyarrow",
    "numpy",
    "pyspark",
    "streamlit",
    "altair",
    "pydantic",
    "pydantic_settings",
    "requests",
    "urllib3",
    "prometheus_client",
    "mmh3",
    "numba",
    "pulsar",
)

# A child that runs each case in turn and prints, after each, the modules it has so far: what
# a case adds first shows under its name (a later case's need is an earlier one's import).
RUN_CASES = """
import contextlib, io, json, sys
start = set(sys.modules)
from pulsar_lens.cli.main import main
for case in json.loads(sys.argv[1]):
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        try:
            main(case)
        except SystemExit:
            pass
    print(json.dumps([case, sorted(set(sys.modules) - start)]))
"""

HEALTHCHECK = """
import contextlib, io, json, sys
start = set(sys.modules)
from pulsar_lens.cli import healthcheck
cases = (["--help"], ["--dashboard", "http://127.0.0.1:1/_stcore/health"])
for case in cases:
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        try:
            healthcheck.main(case, environ={})
        except SystemExit:
            pass
    print(json.dumps([case, sorted(set(sys.modules) - start)]))
"""


def command_paths(
    parser: argparse.ArgumentParser, path: tuple[str, ...] = ()
) -> Iterator[tuple[str, ...]]:
    """Every command and sub-command word path of `parser` (`collect`, `drill unload`, ...)."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for word, child in action.choices.items():
                yield (*path, word)
                yield from command_paths(child, (*path, word))


def cases() -> list[list[str]]:
    helps = [[*path, "--help"] for path in command_paths(build_parser())]
    errors = [["no-such-command"], ["collect", "--interval", "soon"], ["hash"]]
    return [["--help"], ["--version"], *helps, *errors]


def run(script: str, *args: str) -> list[tuple[list[str], list[str]]]:
    done = subprocess.run(
        [sys.executable, "-c", script, *args],
        capture_output=True,
        text=True,
        check=True,
        timeout=300,
    )
    return [(case, modules) for case, modules in map(json.loads, done.stdout.splitlines())]


def outside_stdlib(modules: list[str]) -> set[str]:
    tops = {name.split(".")[0] for name in modules}
    return {t for t in tops if t not in sys.stdlib_module_names and t != "pulsar_lens"}


def first_seen(results: list[tuple[list[str], list[str]]]) -> dict[str, str]:
    """Each module outside the standard library -> the case that first loaded it."""
    seen: dict[str, str] = {}
    for case, modules in results:
        for top in sorted(outside_stdlib(modules)):
            seen.setdefault(top, " ".join(case))
    return seen


def test_parsing_every_command_line_imports_none_of_the_heavy_packages() -> None:
    every = cases()
    results = run(RUN_CASES, json.dumps(every))
    assert [case for case, _ in results] == every
    assert any(case == ["collect", "--help"] for case in every)
    assert any(case == ["drill", "unload", "--help"] for case in every)
    seen = first_seen(results)
    assert not {m: c for m, c in seen.items() if m in HEAVY}, seen
    assert not seen, f"modules outside the standard library, by the case that loaded them: {seen}"


def test_the_version_is_read_only_by_version() -> None:
    """importlib.metadata (email, zipfile, csv) is what `--version` asks; nothing else does."""
    results = run(RUN_CASES, json.dumps([["--help"], ["collect", "--help"], ["--version"]]))
    loaded = {" ".join(case): "importlib.metadata" in modules for case, modules in results}
    assert loaded == {"--help": False, "collect --help": False, "--version": True}


def test_the_health_check_imports_the_standard_library_only() -> None:
    results = run(HEALTHCHECK)
    assert [case[0] for case, _ in results] == ["--help", "--dashboard"]
    assert not first_seen(results)
    pulsar_lens = {m for _, modules in results for m in modules if m.startswith("pulsar_lens.")}
    assert not {m for m in pulsar_lens if m.split(".")[1] not in ("cli", "core")}, pulsar_lens
