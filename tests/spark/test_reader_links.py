"""The Spark reader leaves out symbolic links below the store root exactly as the store's own
reads do: the same rows, none from behind a link, and the link named in a warning."""

from __future__ import annotations

import datetime as dt
import logging
import os
from pathlib import Path

import pandas as pd
import pytest

from pulsar_lens.core.store import Store
from pulsar_lens.plugins.spark.reader import read
from tests.core.test_store_links import (
    NOW,
    T0,
    Plant,
    day_folder_dangling,
    day_folder_inside,
    day_folder_outside,
    file_dangling,
    file_inside,
    file_outside,
    old_store,
    own_polls,
    table_folder_outside,
)

pytestmark = pytest.mark.spark

# the table each kind of link is planted in
CASES: dict[str, tuple[Plant, str]] = {
    "day folder to outside": (day_folder_outside, "topics"),
    "day folder to inside": (day_folder_inside, "topics"),
    "dangling day folder": (day_folder_dangling, "topics"),
    "file to outside": (file_outside, "topics"),
    "file to inside": (file_inside, "topics"),
    "dangling file": (file_dangling, "topics"),
    "table folder to outside": (table_folder_outside, "events"),
}
SINCE = T0 - dt.timedelta(hours=1)  # both the linked old day and the store's own day
UNTIL = NOW + dt.timedelta(hours=1)


def links_below(root: Path) -> list[Path]:
    found = []
    for folder, dirs, files in os.walk(root):  # never follows a link
        found.extend(p for p in (Path(folder, n) for n in dirs + files) if p.is_symlink())
    return found


def rows(frame: pd.DataFrame) -> pd.DataFrame:
    return frame.sort_values(["collected_at", "topic"]).reset_index(drop=True)


@pytest.mark.parametrize(("plant", "table"), CASES.values(), ids=list(CASES))
def test_spark_reads_leave_out_links_as_the_store_does(
    spark: object, tmp_path: Path, caplog: pytest.LogCaptureFixture, plant: Plant, table: str
) -> None:
    outside = old_store(tmp_path / "outside")
    root = tmp_path / "store"
    own_polls(root)
    before = Store(root).read(table, since=SINCE, until=UNTIL).to_pandas()
    plant(root, outside)
    (link,) = links_below(root)
    with caplog.at_level(logging.WARNING):
        got = read(spark, root, table, since=SINCE, until=UNTIL).drop("date").toPandas()
    assert any(str(link) in r.getMessage() for r in caplog.records), caplog.text
    want = Store(root).read(table, since=SINCE, until=UNTIL).to_pandas()
    assert list(got.columns) == list(want.columns)
    pd.testing.assert_frame_equal(rows(got), rows(want), check_dtype=False)
    pd.testing.assert_frame_equal(rows(want), rows(before))  # nothing from behind the link
