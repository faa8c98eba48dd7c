"""The two parts of a run (tests/parts.py): together they are the whole collection, they share
no test, neither is empty, and a module that reaches the broker pool goes whole to "brokers".

The whole suite is collected once, without running a test (pytest's `--collect-only` in a child
process that sees neither PYTEST_ADDOPTS, a selection given to this run, nor a shuffle seed),
and `--lens-part-map` says each test's part; that `--lens-part` keeps exactly those tests is
proven on small modules, run in process.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.parts import PARTS, SPARK_IN_REST, broker_modules, part_of

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


def part_map(tmp_path: Path) -> dict[str, str]:
    """Each test of the suite and its part, from one `pytest --collect-only`."""
    env = {
        k: v for k, v in os.environ.items() if k != "PYTEST_ADDOPTS" and not k.startswith("PULSAR_")
    }
    out = tmp_path / "parts.json"
    argv = [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
            f"--lens-part-map={out}"]  # fmt: skip
    done = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=540)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    listed = {line for line in done.stdout.splitlines() if "::" in line}
    parts: dict[str, str] = json.loads(out.read_text())
    assert set(parts) == listed, sorted(set(parts) ^ listed)[:20]
    return parts


def test_the_parts_are_the_whole_collection_and_share_no_test(tmp_path: Path) -> None:
    parts = part_map(tmp_path)
    found = {part: {node for node, p in parts.items() if p == part} for part in PARTS}
    assert set(parts.values()) == set(PARTS), {part: len(found[part]) for part in PARTS}
    files = {part: {node.split("::")[0] for node in found[part]} for part in PARTS}
    assert not files["brokers"] & files["rest"], sorted(files["brokers"] & files["rest"])[:20]
    assert "tests/live/test_metrics_live.py" in files["brokers"]
    assert "tests/deploy/test_image.py" in files["brokers"]  # and so its image prebuild
    assert "tests/spark/test_cluster.py" in files["brokers"]
    assert not {f for f in files["rest"] if f.startswith("tests/live/")}
    spark_in_rest = {f.removeprefix("tests/spark/") for f in files["rest"] if "/spark/" in f}
    assert spark_in_rest == SPARK_IN_REST, spark_in_rest  # and every other one in "brokers"
    assert "tests/core/test_hashing.py" in files["rest"]
    assert "tests/test_parts.py" in files["rest"]


PART_CONFTEST = """
from tests.parts import add_option, keep_part

def pytest_addoption(parser):
    add_option(parser)

def pytest_collection_modifyitems(config, items):
    keep_part(config, items)
"""


@pytest.mark.parametrize("part", PARTS)
def test_lens_part_keeps_its_tests_and_deselects_the_others(
    pytester: pytest.Pytester, part: str
) -> None:
    pytester.makeini("[pytest]\nmarkers =\n    live: talks to a real Pulsar\n")
    pytester.makeconftest(PART_CONFTEST)
    pytester.makepyfile(test_pool=POOL_MODULE, test_plain=PLAIN_MODULE, test_live=LIVE_MODULE)
    mapped = pytester.path / "parts.json"
    run = pytester.inline_run(f"--lens-part={part}", f"--lens-part-map={mapped}")
    parts = json.loads(mapped.read_text())
    ran = {r.nodeid for r in run.getreports("pytest_runtest_logreport") if r.when == "call"}
    deselected = [item.nodeid for c in run.getcalls("pytest_deselected") for item in c.items]
    assert len(ran) == (3 if part == "brokers" else 1) and run.ret == 0
    assert sorted([*ran, *deselected]) == sorted(parts)
    assert ran == {node for node, p in parts.items() if p == part}


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
