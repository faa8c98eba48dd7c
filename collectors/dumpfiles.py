"""The files of a dump of admin answers, read as hostile: bounded, typed, or refused.

Each file holds what one `pulsar-admin` command printed or what one admin REST call answered
(docs/import.md lists them). Most are the same JSON either way; where `pulsar-admin` prints
something else, both forms are read: a list of names (JSON, or one name a line), a broker's
owned bundles (JSON, or pulsar-admin's `key    [broker_assignment=... is_active=...]` lines),
the dimension metrics (a JSON list, or pulsar-admin's objects one after another) and the
version (a JSON string, or the bare text).

A file is read only when it is a regular file (no link, device or pipe) no larger than the
cap; what cannot be read raises `DumpRefused` naming the file and why.
"""

from __future__ import annotations

import datetime as dt
import errno
import json
import os
import re
import stat
from pathlib import Path
from typing import Any

from pulsar_lens.collectors.answers import decode_json
from pulsar_lens.collectors.fields import json_kind
from pulsar_lens.core.errors import DumpRefused

SUFFIXES = ("", ".json", ".txt")
"""A dump's file is named after its command, with or without one of these endings."""
MAX_ITEMS = 1_000_000  # JSON values one after another in a file (the dimension metrics)
MAX_TIME_TEXT = 200  # a captured_at file: one timestamp
_OWNED_LINE = re.compile(r"(\S+)\s+\[(.*)\]")
_FOLDER_TIME = re.compile(
    r"(\d{4})-?(\d{2})-?(\d{2})T(\d{2})[-:]?(\d{2})[-:]?(\d{2})(\.\d{1,9})?(Z|[+-]\d{2}:?\d{2})"
)


def shown_path(path: Path | str) -> str:
    """A path as a message shows it: as it is, or quoted when it holds anything unprintable
    (a newline or escape sequence in a file name is data, not part of the message)."""
    text = str(path)
    return text if text.isprintable() else repr(text)


def refused(path: Path | str, reason: str) -> DumpRefused:
    return DumpRefused(shown_path(path), reason)


def find(folder: Path, name: str) -> Path | None:
    """The file of command `name` in `folder` (any of SUFFIXES), None when there is none;
    refused when it is there under two endings (which one would be read?)."""
    found = [folder / f"{name}{suffix}" for suffix in SUFFIXES]
    found = [p for p in found if os.path.lexists(p)]
    if len(found) > 1:
        names = " and ".join(p.name for p in found)
        raise refused(folder, f"holds {names}: one file per command, keep one")
    return found[0] if found else None


def read_bytes(path: Path, cap: int) -> bytes:
    """The whole file, refused when it is no regular file or larger than `cap` bytes."""
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0)
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise refused(path, "is a symbolic link; a dump holds plain files") from None
        raise refused(path, f"cannot be opened: {exc.strerror}") from None
    with os.fdopen(fd, "rb") as file:
        info = os.fstat(file.fileno())
        if not stat.S_ISREG(info.st_mode):
            raise refused(path, "is not a regular file")
        if info.st_size > cap:
            raise refused(path, f"is {info.st_size:,} bytes, over the {cap:,} a file may hold")
        body = file.read(cap + 1)
    if len(body) > cap:
        raise refused(path, f"grew past the {cap:,} bytes a file may hold while it was read")
    return body


def read_json(path: Path, cap: int) -> Any:
    """The file's JSON (read as the collector reads an answer)."""
    return _decoded(path, read_bytes(path, cap))


def _decoded(path: Path, body: bytes) -> Any:
    try:
        return decode_json(body)
    except RecursionError:
        raise refused(path, "nests its JSON too deeply to be read") from None
    except ValueError as exc:
        raise refused(path, f"is not JSON: {exc}") from None


def _text(path: Path, body: bytes) -> str:
    return body.decode("utf-8-sig", "surrogateescape")


def read_object(path: Path, cap: int, what: str) -> dict[str, Any]:
    value = read_json(path, cap)
    if not isinstance(value, dict):
        raise refused(path, f"holds {_kind(value)}, not the JSON object of {what}")
    return value


def read_names(path: Path, cap: int, what: str) -> list[Any]:
    """A listing: a JSON list (the REST answer) or one name a line (pulsar-admin)."""
    body = read_bytes(path, cap)
    text = _text(path, body).strip()
    if path.suffix == ".json" or re.match(r"\[\s*(\"|\])", text):
        value = _decoded(path, body)
        if not isinstance(value, list):
            raise refused(path, f"holds {_kind(value)}, not the JSON list of {what}")
        return value
    return [line.strip() for line in text.splitlines() if line.strip()]


def read_owned(path: Path, cap: int) -> dict[str, Any]:
    """A broker's owned bundles: the REST object, or pulsar-admin's lines
    `tenant/ns/0x..._0x...    [broker_assignment=shared is_controlled=false is_active=true]`."""
    body = read_bytes(path, cap)
    text = _text(path, body).strip()
    if not text or text.startswith("{"):
        value = _decoded(path, body) if text else {}
        if not isinstance(value, dict):
            raise refused(path, f"holds {_kind(value)}, not the owned bundles' JSON object")
        return value
    owned: dict[str, Any] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        match = _OWNED_LINE.fullmatch(line.strip())
        if match is None:
            raise refused(path, f"line {number} is no `bundle    [key=value ...]` line")
        status: dict[str, Any] = {}
        for pair in match.group(2).split():
            key, _, value = pair.partition("=")
            status[key] = {"true": True, "false": False}.get(value, value)
        owned[match.group(1)] = status
    return owned


def read_metrics(path: Path, cap: int) -> list[Any]:
    """The dimension metrics: a JSON list (REST), or the objects pulsar-admin prints one
    after another."""
    body = read_bytes(path, cap)
    text = _text(path, body).strip()
    if text.startswith("["):
        value = _decoded(path, body)
        return value if isinstance(value, list) else [value]
    decoder = json.JSONDecoder()
    found: list[Any] = []
    at = 0
    while at < len(text):
        if len(found) >= MAX_ITEMS:
            raise refused(path, f"holds over {MAX_ITEMS:,} JSON values")
        try:
            value, end = decoder.raw_decode(text, at)
        except RecursionError:
            raise refused(path, "nests its JSON too deeply to be read") from None
        except ValueError as exc:
            raise refused(path, f"is not JSON: {exc}") from None
        found.append(value)
        at = len(text) - len(text[end:].lstrip())
    return found


def read_scalar(path: Path, cap: int) -> str | None:
    """A bare text answer (the broker's version): a JSON string or the text itself."""
    text = _text(path, read_bytes(path, cap)).strip()
    if text.startswith('"'):
        try:
            value = json.loads(text)
        except ValueError as exc:
            raise refused(path, f"is not JSON: {exc}") from None
        text = value if isinstance(value, str) else ""
    return text[:MAX_TIME_TEXT] or None


def parse_capture_time(text: str) -> dt.datetime | None:
    """A capture's time, from its folder name or its captured_at file: ISO-8601 with a
    timezone (`2026-12-02T04:39:37Z`), also with `-` for `:` (`2026-12-02T04-39-37Z`) or
    basic (`20261202T043937Z`, what `date -u +%Y%m%dT%H%M%SZ` prints); None when not one."""
    match = _FOLDER_TIME.fullmatch(text.strip())
    if match is None:
        return None
    year, month, day, hour, minute, second, fraction, zone = match.groups()
    zone = "+00:00" if zone == "Z" else f"{zone[:3]}:{zone[-2:]}"
    micros = (fraction or ".0")[1:7].ljust(6, "0")
    try:
        parsed = dt.datetime.fromisoformat(
            f"{year}-{month}-{day}T{hour}:{minute}:{second}.{micros}{zone}"
        )
    except ValueError:
        return None
    return parsed.astimezone(dt.UTC)


def capture_time(folder: Path, cap: int) -> dt.datetime:
    """When a capture was taken: its `captured_at` file, else its folder's name."""
    path = find(folder, "captured_at")
    if path is not None:
        text = _text(path, read_bytes(path, min(cap, 4096)))
        when = parse_capture_time(text[:MAX_TIME_TEXT])
        if when is None:
            raise refused(path, "holds no ISO-8601 time with a timezone, e.g. 2026-12-02T04:39:37Z")
        return when
    when = parse_capture_time(folder.name)
    if when is None:
        raise refused(
            folder,
            "says no capture time: name the folder by its UTC time (2026-12-02T04-39-37Z) "
            "or put the time in a captured_at file",
        )
    return when


def _kind(value: Any) -> str:
    return json_kind(value)
