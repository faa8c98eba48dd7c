"""Tests of the topic_rate_history.py Spark drop-in on a local Spark session (Java needed)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from pulsar_lens.api import Chart, Table
from pulsar_lens.core.model import TopicRecord
from pulsar_lens.core.store import Store
from pulsar_lens.plugins import runner
from pulsar_lens.plugins.testing import load_drop_in, make_snapshot

FOLDER = Path(__file__).resolve().parents[1]  # the drop-in folder
TopicRateHistory = load_drop_in(FOLDER / "topic_rate_history.py").TopicRateHistory


@pytest.fixture(scope="session")
def spark() -> Iterator[object]:
    """One local session for the test run, as the job worker has one."""
    from pulsar_lens.plugins.spark import session

    yield session.get("local[2]")


def topic(name: str, rate: float) -> TopicRecord:
    return TopicRecord(
        f"persistent://public/default/{name}", "public", "public/default", msg_rate_in=rate
    )


def test_the_busiest_topics_over_every_stored_poll(spark: object, tmp_path: Path) -> None:
    store = Store(tmp_path / "store")  # a Spark plugin reads the store's files
    for i, (a, b) in enumerate([(10.0, 1.0), (30.0, 2.0), (20.0, 9.0)]):
        store.write(make_snapshot(30.0 * i, topics=[topic("a", a), topic("b", b)]))
    output = runner.run(TopicRateHistory(), store, {"top": 5}, use_stored=False)
    busiest = output.result.frames["busiest"]
    assert busiest["topic"].str.rsplit("/", n=1).str[-1].tolist() == ["a", "b"]
    assert busiest["mean_rate_in"].tolist() == [20.0, 4.0] and busiest["polls"].tolist() == [3, 3]
    assert [type(v) for v in output.views] == [Chart, Table]
