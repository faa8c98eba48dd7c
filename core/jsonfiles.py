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

from pulsar_lens.core import links


def json_files(folder: Path, *, store_root: Path) -> list[Path]:
    """The `*.json` files of `folder`, by name (ids that start with a time sort by it).

    Callers delete some of them: none is listed behind a symbolic link below `store_root`
    (a linked folder on the way is reported and lists nothing)."""
    try:
        links.refuse_links_below(store_root, folder.relative_to(store_root))
    except links.LinkRefused as exc:
        links.warn_link(exc.path)
        return []
    return sorted(folder / n for n in links.real_names(folder) if Path(n).suffix == ".json")


def write_json(path: Path, payload: Mapping[str, Any], *, store_root: Path) -> None:
    """Write `payload` to `path` atomically (a staging file renamed into place); LinkRefused
    when a folder on the way from `store_root` is a symbolic link."""
    links.real_folder(store_root, path.parent.relative_to(store_root))
    staging = path.with_name(f".{path.name}.{os.urandom(4).hex()}")
    staging.write_text(json.dumps(payload, default=str))
    staging.replace(path)
