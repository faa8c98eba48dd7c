"""Replay of the admin API answers recorded from Pulsar 4.0.7 (tests/data/admin_api)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import responses
from responses import matchers

DATA = Path(__file__).resolve().parents[1] / "data" / "admin_api"
BASE = "http://127.0.0.1:8080"
BROKER = "127.0.0.1:8080"


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
