"""Fault tier: the collector, the store, the plugins and the dashboard under broken brokers,
a lying admin API, kill -9, a full or read-only disk. Tests that talk to a real Pulsar are
marked live like those under tests/live/."""

from __future__ import annotations

import pytest


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "/tests/faults/" in str(item.path) and "_live" in item.path.name:
            item.add_marker(pytest.mark.live)
