"""Arrow's allocator in our processes (`core.arrowpool`): the CLI chooses it before a command
runs, its children inherit it, and a choice in the environment is kept. (Plugin workers keep
the system allocator their memory limit needs: tests/faults/test_plugin_faults.py.)"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pyarrow as pa

from pulsar_lens.core.arrowpool import ARROW_POOL, ARROW_POOL_ENV

# a command that imports pyarrow (`hash` hashes with it), then what Arrow and a spawned
# child of the collector's part pool use
CHILD = """
import json, sys
from pulsar_lens.cli.main import main
main(["hash", "--json", "k"])
import pyarrow as pa
from pulsar_lens.collectors.bulkparts import PartPool
from tests.core.test_arrowpool import backend
parts = PartPool(1)
try:
    worker = PartPool._submit(parts._pool(), backend).result(timeout=120)
finally:
    parts.close()
print(json.dumps([pa.default_memory_pool().backend_name, worker]), file=sys.stderr)
"""


def backend() -> str:
    return pa.default_memory_pool().backend_name


def run_child(env: dict[str, str]) -> list[str]:
    done = subprocess.run(
        [sys.executable, "-c", CHILD], env=env, capture_output=True, text=True, timeout=180
    )
    assert done.returncode == 0, done.stderr
    found: list[str] = json.loads(done.stderr.strip().splitlines()[-1])
    return found


def test_a_command_and_its_children_use_the_chosen_pool() -> None:
    env = {k: v for k, v in os.environ.items() if k != ARROW_POOL_ENV}
    assert run_child(env) == [ARROW_POOL, ARROW_POOL]


def test_a_pool_chosen_in_the_environment_is_kept() -> None:
    env = {**os.environ, ARROW_POOL_ENV: "system"}
    assert run_child(env) == ["system", "system"]
