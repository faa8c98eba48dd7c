"""The table names the command line offers without pyarrow are the model's tables."""

from __future__ import annotations

from pulsar_lens.core import model, tablenames


def test_tablenames_name_one_record_type_each_in_order() -> None:
    assert tuple(model.RECORD_TYPES) == tablenames.TABLES
    assert set(tablenames.POLLED_TABLES) <= set(tablenames.TABLES)
    assert set(tablenames.TIMED_TABLES) <= set(tablenames.TABLES)
