"""Replay of the admin API answers recorded from Pulsar 4.0.7, 3.0.7 and 4.2.4
(tests/data/admin_api).

`RECORDINGS` pairs each recorded release with its folders; the `recording` fixture
(tests/collectors/conftest.py) runs a test once per release.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import responses
from responses import matchers

DATA = Path(__file__).resolve().parents[1] / "data" / "admin_api"
BASE = "http://127.0.0.1:8080"
BROKER = "127.0.0.1:8080"


@dataclass(frozen=True)
class Recording:
    """The answers of one release: the harness defaults (`default`), and the scenario with
    the modular load manager's report (`modular`), which on 4.0 also runs the classic
    Key_Shared dispatcher and on 3.0 (whose only dispatcher is that one) the auto-split
    selector."""

    version: str  # what the broker says it runs
    default: str
    modular: str

    @property
    def line(self) -> str:
        return self.version.rsplit(".", 1)[0]

    @property
    def pip_379(self) -> bool:
        """The broker has PIP-379's Key_Shared dispatcher: 16-bit hash ranges as arrays,
        draining hashes (4.0 and every later line; 3.0 has only the classic one)."""
        return self.line != "3.0"

    def __str__(self) -> str:
        return self.version


RECORDINGS = (
    Recording("4.0.7", "default", "classic-modular"),
    Recording("3.0.7", "3.0-default", "3.0-autosplit-modular"),
    Recording("4.2.4", "4.2-default", "4.2-classic-modular"),
)


def index(scenario: str) -> list[dict[str, Any]]:
    entries: list[dict[str, Any]] = json.loads((DATA / scenario / "index.json").read_text())
    return entries


def body(scenario: str, path: str, query: str = "") -> str:
    """The recorded body of GET `path` (empty for a bodiless answer)."""
    for entry in index(scenario):
        if entry["path"] == path and entry["query"] == query:
            return (DATA / scenario / entry["file"]).read_text() if entry["file"] else ""
    raise KeyError(f"{scenario} has no recorded answer for {path}?{query}")


def load(scenario: str, path: str, query: str = "") -> Any:
    return json.loads(body(scenario, path, query))


def load_file(scenario: str, name: str) -> Any:
    return json.loads((DATA / scenario / name).read_text())


def register(
    mock: responses.RequestsMock,
    scenario: str,
    *,
    skip: frozenset[str] = frozenset(),
    base: str = BASE,
) -> None:
    """Answer every recorded request from the recording; paths in `skip` are left for the
    test to register (e.g. as failures)."""
    for entry in index(scenario):
        if entry["path"] in skip:
            continue
        text = (DATA / scenario / entry["file"]).read_text() if entry["file"] else ""
        query = dict(pair.split("=", 1) for pair in entry["query"].split("&") if pair)
        mock.add(
            entry["method"],
            base + entry["path"],
            body=text,
            status=entry["status"],
            content_type="application/json",
            match=[matchers.query_param_matcher(query)],
        )
