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
import os
import subprocess
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path

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


# Refusals: settings that do not load, and collect's own checks before it polls. Each is a
# case of a test elsewhere (tests/cli), some of them dozens of times; none needs the data stack.
RUN_REFUSALS = """
import contextlib, io, json, sys
start = set(sys.modules)
from pulsar_lens.cli.main import main
for case in json.loads(sys.argv[1]):
    err = io.StringIO()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
        code = main(case)
    print(json.dumps([case, sorted(set(sys.modules) - start), code, err.getvalue()]))
"""
DATA_STACK = ("pandas", "pyarrow", "numpy", "pyspark", "streamlit", "altair")


def refusals(cases: list[list[str]], env: Mapping[str, str]) -> dict[str, tuple[int, str]]:
    """Each case run in one child, in turn -> (its exit code, what it said); asserts that none
    of them imported the data stack."""
    done = subprocess.run(
        [sys.executable, "-c", RUN_REFUSALS, json.dumps(cases)],
        capture_output=True,
        text=True,
        check=True,
        timeout=300,
        env=env,
    )
    results = [json.loads(line) for line in done.stdout.splitlines()]
    assert [case for case, *_ in results] == cases
    seen = first_seen([(case, modules) for case, modules, *_ in results])
    assert not {m: c for m, c in seen.items() if m in DATA_STACK}, seen
    return {" ".join(case): (code, said) for case, _, code, said in results}


def test_a_command_that_refuses_its_settings_says_so_before_importing_the_data_stack(
    tmp_path: Path,
) -> None:
    env = {**os.environ, "PULSAR_LENS_POLL_INTERVAL": "soon", "PULSAR_LENS_STORE": str(tmp_path)}
    cases = [
        ["collect", "--once"],
        ["import", str(tmp_path)],
        ["analyze", "subscription-status"],
        ["drill", "unload", "--bundle", "public/default/0x00000000_0x40000000"],
    ]
    for case, (code, said) in refusals(cases, env).items():
        assert code == 2, (case, said)
        assert "PULSAR_LENS_POLL_INTERVAL: 'soon' is not a duration" in said, (case, said)


def test_collect_refusing_its_admin_url_or_retention_imports_no_data_stack(
    tmp_path: Path,
) -> None:
    env = {
        k: v for k, v in os.environ.items() if k not in ("PULSAR_ADMIN_URL", "PULSAR_LENS_CONFIG")
    }
    env["PULSAR_LENS_STORE"] = str(tmp_path)
    said = refusals(
        [
            ["collect", "--once"],
            ["collect", "--once", "--admin-url", "ftp://127.0.0.1:1"],
            ["collect", "--once", "--admin-url", "http://127.0.0.1:1", "--retention", "1s"],
        ],
        env,
    )
    assert {case: code for case, (code, _) in said.items()} == dict.fromkeys(said, 2)
    assert "no admin URL" in said["collect --once"][1]
    assert "admin URL" in said["collect --once --admin-url ftp://127.0.0.1:1"][1]
    retention = said["collect --once --admin-url http://127.0.0.1:1 --retention 1s"][1]
    assert "--retention" in retention


def test_collect_refusing_its_credentials_imports_no_data_stack(tmp_path: Path) -> None:
    base = {
        k: v for k, v in os.environ.items() if not k.startswith(("PULSAR_ADMIN", "PULSAR_LENS"))
    }
    base |= {"PULSAR_LENS_STORE": str(tmp_path), "PULSAR_ADMIN_URL": "http://127.0.0.1:9"}
    cases = {
        "PULSAR_ADMIN_TOKEN_FILE": {"PULSAR_ADMIN_TOKEN_FILE": "/dev/zero"},
        "PULSAR_ADMIN_TOKEN": {"PULSAR_ADMIN_TOKEN": "caf\u00e9-token"},
        "PULSAR_LENS_OAUTH2_PRIVATE_KEY": {
            "PULSAR_LENS_OAUTH2_PRIVATE_KEY": "/dev/zero",
            "PULSAR_LENS_OAUTH2_ISSUER_URL": "http://127.0.0.1:9",
        },
    }
    for setting, env in cases.items():
        [(code, said)] = refusals([["collect", "--once"]], base | env).values()
        assert code == 2 and setting in said, (setting, said)
