"""The two parts of a run (tests/parts.py): together they are the whole collection, they share
no test, neither is empty, and a module that reaches the broker pool goes whole to "brokers".

The whole check collects the suite three times (whole, each part) side by side, without running
a test: pytest's `--collect-only`, in child processes that see neither PYTEST_ADDOPTS (a
selection given to this run) nor a shuffle seed.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.parts import PARTS, broker_modules, part_of

pytest_plugins = ["pytester"]

ROOT = Path(__file__).resolve().parents[1]

POOL_MODULE = """
import pytest

@pytest.fixture(scope="session")
def broker_pool():
    return object()

@pytest.fixture
def pulsar(broker_pool):
    return broker_pool

def test_with_a_broker(pulsar):
    pass

def test_without_one():
    pass
"""
PLAIN_MODULE = "def test_plain():\n    pass\n"
LIVE_MODULE = "import pytest\n\npytestmark = pytest.mark.live\n\ndef test_own_broker():\n    pass\n"


def collected(*args: str) -> set[str]:
    """The node ids `pytest --collect-only -q` lists with `args`."""
    env = {
        k: v for k, v in os.environ.items() if k != "PYTEST_ADDOPTS" and not k.startswith("PULSAR_")
    }
    argv = [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider"]
    done = subprocess.run(
        [*argv, *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=540
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return {line for line in done.stdout.splitlines() if "::" in line}


def collect_side_by_side(runs: dict[str, tuple[str, ...]]) -> dict[str, set[str]]:
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=len(runs)) as pool:
        futures = {name: pool.submit(collected, *args) for name, args in runs.items()}
        return {name: future.result() for name, future in futures.items()}


def test_the_parts_are_the_whole_collection_and_share_no_test() -> None:
    runs = {"whole": ()} | {part: (f"--lens-part={part}",) for part in PARTS}
    found = collect_side_by_side(runs)
    brokers, rest = found["brokers"], found["rest"]
    assert brokers and rest, {part: len(found[part]) for part in PARTS}
    assert not brokers & rest, sorted(brokers & rest)[:20]
    assert brokers | rest == found["whole"], {
        "in no part": sorted(found["whole"] - brokers - rest)[:20],
        "in a part only": sorted((brokers | rest) - found["whole"])[:20],
    }
    files = {part: {node.split("::")[0] for node in found[part]} for part in PARTS}
    assert "tests/live/test_metrics_live.py" in files["brokers"]
    assert "tests/deploy/test_image.py" in files["brokers"]  # and so its image prebuild
    assert "tests/spark/test_cluster.py" in files["brokers"]
    assert not {f for f in files["rest"] if f.startswith(("tests/live/", "tests/spark/"))}
    assert "tests/core/test_hashing.py" in files["rest"]
    assert "tests/test_parts.py" in files["rest"]


def test_a_module_reaching_the_pool_goes_whole_to_brokers(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\nmarkers =\n    live: talks to a real Pulsar\n")
    pytester.makepyfile(test_pool=POOL_MODULE, test_plain=PLAIN_MODULE, test_live=LIVE_MODULE)
    items, _ = pytester.inline_genitems()
    brokers = broker_modules(items)
    parts = {item.nodeid: part_of(item, brokers) for item in items}
    assert parts == {
        "test_live.py::test_own_broker": "brokers",
        "test_plain.py::test_plain": "rest",
        "test_pool.py::test_with_a_broker": "brokers",
        "test_pool.py::test_without_one": "brokers",
    }
