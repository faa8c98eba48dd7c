"""Generated-input tests hold on a busy machine: no example is timed (tests/conftest.py)."""

from __future__ import annotations

from hypothesis import HealthCheck, settings


def test_no_generated_example_has_a_deadline() -> None:
    assert settings().deadline is None
    assert HealthCheck.too_slow in settings().suppress_health_check
