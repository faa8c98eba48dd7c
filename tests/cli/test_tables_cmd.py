"""`pulsar-lens tables`: the column reference plugin authors read, generated from the schemas."""

from __future__ import annotations

from pathlib import Path

import pytest

from pulsar_lens.cli.main import main
from pulsar_lens.cli.tables_cmd import tables_markdown
from pulsar_lens.core.model import SCHEMAS, TABLES
from pulsar_lens.core.tabledocs import describe_table

DOC = Path(__file__).resolve().parents[2] / "docs" / "tables.md"


def test_docs_tables_md_is_the_generated_reference() -> None:
    assert DOC.read_text() == tables_markdown(), (
        "docs/tables.md is stale: run `pulsar-lens tables --markdown > docs/tables.md`"
    )


@pytest.mark.parametrize("name", TABLES)
def test_every_stored_column_is_described(name: str) -> None:
    columns = describe_table(name)
    assert [c.name for c in columns] == SCHEMAS[name].names
    assert [c.name for c in columns if not c.meaning] == []


def test_tables_cmd_prints_one_table(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["tables", "consumers"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("consumers: written by every poll of the admin API\n")
    assert "hash_ranges" in out and "Key_Shared hash ranges it owns" in out
