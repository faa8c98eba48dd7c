"""One local Spark session for the whole run (`pulsar_lens.plugins.spark.session`), on local[2]."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest


@pytest.fixture(scope="session")
def spark() -> Iterator[object]:
    os.environ.setdefault("SPARK_TESTING", "1")
    from pulsar_lens.plugins.spark import session

    yield session.get("local[2]")
