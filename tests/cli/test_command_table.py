"""Each command parses with its own module only, and the table saying which module registers
which command is what the modules register."""

from __future__ import annotations

import argparse
import importlib
import subprocess
import sys

from pulsar_lens.cli.main import COMMAND_MODULES, COMMANDS, build_parser


def test_the_command_table_is_what_the_modules_register() -> None:
    registered: dict[str, str] = {}
    for name in COMMAND_MODULES:
        sub = argparse.ArgumentParser().add_subparsers()
        importlib.import_module(name).register(sub)
        registered.update(dict.fromkeys(sub.choices, name))
    assert registered == COMMANDS


def test_a_command_parses_alone_and_no_command_parses_them_all() -> None:
    alone = build_parser("plugins")
    assert alone.parse_args(["plugins", "--json"]).json
    every = build_parser()
    assert every.parse_args(["tables"]).command == "tables"


def test_listing_plugins_imports_neither_altair_nor_the_collector() -> None:
    script = (
        "import sys, io, contextlib\n"
        "from pulsar_lens.cli.main import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        "    main(['plugins'])\n"
        "print(sorted(m for m in ('altair', 'streamlit', 'pyspark', "
        "'pulsar_lens.collectors.loop', 'pulsar_lens.lab.localpulsar') if m in sys.modules))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True, timeout=300
    )
    assert done.stdout.strip() == "[]"
