"""Live tier: real Pulsar 4.0 standalones on 127.0.0.1, started by this test run.

Use the `pulsar` fixture for the default broker, or `broker_pool.get({...settings...})` for a
broker with other settings (both in tests/conftest.py). A broker that cannot start fails the
test; live tests never skip.
"""

from __future__ import annotations

import pytest


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "/tests/live/" in str(item.path):
            item.add_marker(pytest.mark.live)
