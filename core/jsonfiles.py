"""Small JSON files that several processes share through the store's folder.

Each file is written whole and renamed into place, so a reader sees an old or a new version,
never half of one. Used by the Spark job queue and the drill queue.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any


def json_files(folder: Path) -> list[Path]:
    """The `*.json` files of `folder`, by name (ids that start with a time sort by it)."""
    try:
        return sorted(p for p in folder.iterdir() if p.suffix == ".json")
    except FileNotFoundError:
        return []


def write_json(path: Path, payload: Mapping[str, Any]) -> None:
    """Write `payload` to `path` atomically (a staging file renamed into place)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    staging = path.with_name(f".{path.name}.{os.urandom(4).hex()}")
    staging.write_text(json.dumps(payload, default=str))
    staging.replace(path)
