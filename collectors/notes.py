"""What the parsers of one poll refused or cut from the answers, counted.

An answer can hold a million malformed items; each kind of refusal (what, which field, why)
becomes one line of the snapshot's errors with its count and the first few names, so a
snapshot says what it left out without a line per item. Inside `noting(notes)`, `refuse()`
and `cut()` add to `notes`; outside, they do nothing (a parser called on its own).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

MAX_EXAMPLES = 3
NAME_SHOWN = 160  # a name an example starts with: long enough for most full topic names
MAX_KINDS = 50  # kinds come from the parsers' own vocabulary; this only guards a bug
REFUSED = "refused"
CUT = "cut"
FIELD = "field"  # a value no column holds, stored as null (`fields.warn`)
ACTIONS = (REFUSED, CUT, FIELD)
"""The `EndpointError.endpoint` of what was left out of answers: items, not failed calls."""


@dataclass
class _Tally:
    count: int = 0
    examples: list[str] = field(default_factory=list)


@dataclass
class Notes:
    """The refusals and cuts of one poll, per (action, what, why)."""

    tallies: dict[tuple[str, str, str], _Tally] = field(default_factory=dict)
    other_kinds: int = 0
    total: int = 0  # items noted, of every kind

    def add(self, action: str, what: str, why: str, example: Iterator[str] | None) -> None:
        self.total += 1
        key = (action, what, why)
        tally = self.tallies.get(key)
        if tally is None:
            if len(self.tallies) >= MAX_KINDS:
                self.other_kinds += 1
                return
            tally = self.tallies[key] = _Tally()
        tally.count += 1
        if example is not None and len(tally.examples) < MAX_EXAMPLES:
            tally.examples.append(" ".join(example))

    def merge(self, other: Notes) -> None:
        """`other`'s tallies after these, as if noted after them (e.g. in a worker process)."""
        self.total += other.total
        for key, theirs in other.tallies.items():
            tally = self.tallies.get(key)
            if tally is None:
                if len(self.tallies) >= MAX_KINDS:
                    self.other_kinds += theirs.count
                    continue
                tally = self.tallies[key] = _Tally()
            tally.count += theirs.count
            tally.examples.extend(theirs.examples[: MAX_EXAMPLES - len(tally.examples)])
        self.other_kinds += other.other_kinds

    def lines(self) -> list[tuple[str, str]]:
        """(action, text) per kind: "<what>: <why> (<count> time(s), e.g. ...)"."""
        found = []
        for (action, what, why), tally in self.tallies.items():
            times = f"{tally.count:,} time(s)"
            examples = f", e.g. {'; '.join(tally.examples)}" if tally.examples else ""
            found.append((action, f"{what}: {why} ({times}{examples})"))
        if self.other_kinds:
            found.append((REFUSED, f"... and {self.other_kinds:,} more refused item(s)"))
        return found


_notes: ContextVar[Notes | None] = ContextVar("notes", default=None)
_where: ContextVar[tuple[object, ...]] = ContextVar("notes_where", default=())


@contextmanager
def noting(notes: Notes) -> Iterator[Notes]:
    """Count the refusals and cuts of the parsers called inside the block in `notes`."""
    token = _notes.set(notes)
    try:
        yield notes
    finally:
        _notes.reset(token)


def current_notes() -> Notes | None:
    """The notes being collected (inside `noting`), if any."""
    return _notes.get()


class within:
    """Name what the items refused inside the block belong to (topic, subscription, ...);
    each example starts with these names.

    A class, not a generator: it runs for every topic, subscription and consumer of a poll,
    and the names are only shown (`shown`) when an example is written."""

    __slots__ = ("names", "token")

    def __init__(self, *names: object) -> None:
        self.names = names

    def __enter__(self) -> None:
        self.token = _where.set((*_where.get(), *self.names))

    def __exit__(self, *exc: object) -> None:
        _where.reset(self.token)


def refuse(what: str, why: str, *names: object) -> None:
    """One item of an answer left out: `what` (e.g. "consumer keyHashRangeArrays item"),
    `why` (the same words for every item of the kind), `names` the item's own (quoted)."""
    _note(REFUSED, what, why, names)


def cut(what: str, why: str, *names: object) -> None:
    """One list or text of an answer shortened to its bound (said once per item)."""
    _note(CUT, what, why, names)


def _note(action: str, what: str, why: str, names: tuple[object, ...]) -> None:
    notes = _notes.get()
    if notes is not None:
        # the examples are formatted only while there is room for them
        tally = notes.tallies.get((action, what, why))
        room = tally is None or len(tally.examples) < MAX_EXAMPLES
        where = (shown(n, limit=NAME_SHOWN) for n in _where.get())
        example = iter((*where, *(shown(n) for n in names))) if room else None
        notes.add(action, what, why, example)


def shown(value: Any, *, limit: int = 40) -> str:
    """A payload value as a warning quotes it: repr, at most `limit` characters."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def duplicates_of(value: Mapping[str, Any]) -> tuple[str, ...]:
    """The keys an answer's object held more than once (see `answers.decode_json`)."""
    return getattr(value, "duplicates", ())
