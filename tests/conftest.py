"""Shared fixtures for every test tier."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

from pulsar_lens.core import secrets
from pulsar_lens.core.allocators import (
    ARROW_POOL,
    ARROW_POOL_ENV,
    MMAP_THRESHOLD,
    MMAP_THRESHOLD_ENV,
    set_huge_pages,
)
from pulsar_lens.core.parts import SPARK_JAVA_OPTIONS_ENV
from pulsar_lens.lab.localpulsar import LocalPulsar
from tests.brokers import SHEDDING_SETTINGS, BrokerPool
from tests.lens_cli import RUN_SETTINGS
from tests.parts import add_option, keep_part
from tests.shuffle import SEED_VARIABLE, shuffle_seed, shuffled

# Generated examples are judged by what they return, never by how long they took: Hypothesis's
# default 200 ms deadline and its "too slow" check fail a property on a busy machine.
settings.register_profile(
    "lens", deadline=None, suppress_health_check=[HealthCheck.too_slow], print_blob=True
)
settings.load_profile("lens")

# The run's processes, and all they start, without transparent huge pages, as every
# `pulsar-lens` command's (`core.allocators`): the functions the tests call in this process
# allocate as the commands do.
set_huge_pages(False)

TEST_SPARK_JAVA_OPTIONS = "-XX:TieredStopAtLevel=1"
"""The test run's Spark drivers compile with C1 only: its Spark work is many small jobs, each
over in seconds, for which C2's compilations cost more than they save (tests/spark's
unload-history module took 118 CPU seconds of its process tree with this, 228 without, side by
side on a loaded 2-core machine). An operator's default stays the JVM's own."""
IMAGE_TESTS = Path(__file__).parent / "deploy" / "test_image.py"
SHEDDING_TESTS = Path(__file__).parent / "live" / "test_load_manager_live.py"
POOL = pytest.StashKey[BrokerPool]()


def pytest_addoption(parser: pytest.Parser) -> None:
    add_option(parser)


def pytest_configure(config: pytest.Config) -> None:
    """The Spark JVM options of the run: for the sessions of this process, and for the
    commands it starts (tests/lens_cli.py keeps the variable in their environment)."""
    from pulsar_lens.plugins.spark import session

    options = os.environ.setdefault(SPARK_JAVA_OPTIONS_ENV, TEST_SPARK_JAVA_OPTIONS)
    session.configure(dataclasses.replace(session.configured(), java_options=options))


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The container image tests run last, and their builds start now in the background: a
    cold build takes most of a quarter of an hour, which the rest of the run then covers.
    So does the shedding cluster's start, and its first minute before the shedder runs.
    With PULSAR_LENS_TEST_SHUFFLE=<seed> the rest runs in a random order (tests/shuffle.py).

    Last of the hooks: the tiers' marks are on, `-k`/`-m` have deselected what they leave out,
    and `--lens-part` (tests/parts.py) keeps one part; only what then remains can start a build
    or a cluster."""
    keep_part(config, items)
    seed = shuffle_seed()
    if seed is not None:
        items[:] = shuffled(items, seed)
    image = [item for item in items if item.path == IMAGE_TESTS]
    if image:
        items[:] = [item for item in items if item.path != IMAGE_TESTS] + image
    if config.option.collectonly:
        return
    if image:
        from tests.deploy.image import start_prebuild

        start_prebuild(config.rootpath / "artifacts")
    if any(item.path == SHEDDING_TESTS for item in items):
        _pool(config).prestart("modular", SHEDDING_SETTINGS)


def pytest_report_header() -> str | None:
    seed = shuffle_seed()
    return None if seed is None else f"test order shuffled: {SEED_VARIABLE}={seed}"


def _pool(config: pytest.Config) -> BrokerPool:
    if POOL not in config.stash:
        config.stash[POOL] = BrokerPool()
    return config.stash[POOL]


def pytest_sessionfinish(session: pytest.Session) -> None:
    from tests.deploy.image import stop_prebuild

    stop_prebuild()
    if POOL in session.config.stash:  # a prestarted cluster no test asked for
        session.config.stash[POOL].stop_all()


@pytest.fixture(autouse=True)
def clean_environ(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """No test sees the developer's PULSAR_* settings (but the run's own, RUN_SETTINGS).

    A collect process started by a test runs no Spark job worker (a JVM per test would not
    fit two cores); the tests of the jobs turn it on. Arrow's allocator and glibc's mmap
    threshold are the ones the CLI chooses (`core.allocators`) from the first test on, not only
    from the first test that runs a command in this process (which sets them for the rest of
    the run).
    """
    for key in list(os.environ):
        if key.startswith("PULSAR_") and key not in ("PULSAR_LENS_CACHE_DIR", *RUN_SETTINGS):
            monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("PULSAR_LENS_SPARK_JOBS", "0")
    monkeypatch.setenv(ARROW_POOL_ENV, os.environ.get(ARROW_POOL_ENV, ARROW_POOL))
    monkeypatch.setenv(MMAP_THRESHOLD_ENV, os.environ.get(MMAP_THRESHOLD_ENV, str(MMAP_THRESHOLD)))
    yield


@pytest.fixture(autouse=True)
def fresh_secrets() -> Iterator[None]:
    """Secrets one test registers (e.g. a password "admin") are not redacted in the next."""
    before = set(secrets._known)
    yield
    with secrets._lock:
        secrets._known.clear()
        secrets._known.update(before)


@pytest.fixture(scope="session")
def broker_pool(pytestconfig: pytest.Config) -> Iterator[BrokerPool]:
    """Real Pulsar 4.0 standalones, one per distinct settings, started once per run."""
    pool = _pool(pytestconfig)
    try:
        yield pool
    finally:
        pool.stop_all()


@pytest.fixture(scope="session")
def pulsar(broker_pool: BrokerPool) -> LocalPulsar:
    """The default broker: consistent hashing with 100 replica points, modulo failover."""
    return broker_pool.get()
