"""The Spark drop-in example's own tests pass as docs/plugins.md tells to run them."""

from __future__ import annotations

import pytest

from tests.example_runs import run_example_tests

pytestmark = pytest.mark.spark


def test_the_spark_drop_in_examples_own_tests_pass() -> None:
    assert "1 passed" in run_example_tests("spark-drop-in", timeout=900)
