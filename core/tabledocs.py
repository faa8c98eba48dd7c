"""What each stored column means, for `pulsar-lens tables` and docs/tables.md: read from a
record's schema and the comments beside its fields in `core.model`."""

from __future__ import annotations

import dataclasses
import inspect
import typing
from dataclasses import dataclass

from pulsar_lens.core.model import COMMON_FIELDS, RECORD_TYPES, arrow_type


@dataclass(frozen=True, slots=True)
class ColumnDoc:
    """One stored column as a plugin reads it: name, Arrow type, nullability, meaning."""

    name: str
    arrow_type: str
    nullable: bool
    meaning: str


def describe_table(name: str) -> tuple[ColumnDoc, ...]:
    """The columns of table `name`, from its schema and the comments beside its record fields."""
    record_type = RECORD_TYPES[name]
    comments = _field_comments(record_type)
    hints = typing.get_type_hints(record_type)
    common = {
        "snapshot_id": "the poll this row belongs to",
        "collected_at": "when that poll started (UTC)",
        "cluster": "the cluster polled",
    }
    columns = [ColumnDoc(f.name, str(f.type), False, common[f.name]) for f in COMMON_FIELDS]
    for f in dataclasses.fields(record_type):
        hint = hints[f.name]
        optional = type(None) in typing.get_args(hint)
        arrow = str(arrow_type(hint))
        columns.append(ColumnDoc(f.name, arrow, optional, comments.get(f.name, "")))
    return tuple(columns)


def _field_comments(record_type: type) -> dict[str, str]:
    """`name: type  # meaning` or a `# meaning` line just above the field."""
    comments: dict[str, str] = {}
    above = ""
    for line in inspect.getsource(record_type).splitlines():
        stripped = line.strip()
        if stripped.startswith("# "):
            above = stripped[2:].strip()
            continue
        name, colon, rest = stripped.partition(":")
        _, hash_mark, comment = rest.partition("  # ")
        if colon and name.isidentifier() and (hash_mark or above):
            comments[name] = comment.strip() if hash_mark else above
        above = ""
    return comments
