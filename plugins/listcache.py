"""The listing cache: what the workers of `pulsar-lens plugins` said of the third-party
sources, kept so that the next listing starts no worker (a worker preloads pandas, pyarrow,
altair and the API, some 2 s on a small machine, before it imports a drop-in).

One file, `<cache dir>/plugin-listing.json`, holds one entry: its key and, for each source,
what the listing shows of each of its plugins. The key is a digest of everything the answers
depend on that a run can read without importing third-party code:

- the sources themselves: each entry point's name, value, distribution and version, each
  drop-in's path;
- the bytes of every `*.py` file in each drop-in folder, its helpers (`_x.py`, subfolders)
  included, and where each links to;
- the directories of installed packages (`site`'s), by modification time: installing,
  upgrading or removing a package changes them, and a drop-in imports packages;
- the version of pulsar_lens and the bytes of the contract a plugin is validated against
  (`pulsar_lens/api.py`, `api_types.py`, `plugins/validation.py`), for a development
  install whose version does not move;
- the Python version and interpreter path, and the plugin limits.

A key that matches is a hit; anything else (no file, another key, a file that cannot be read
or parsed, an entry not of the expected shape, a folder file that cannot be read) is a miss:
the workers are asked again and the entry rewritten. Nothing here is fatal: a cache that
cannot be written is logged and the listing goes on. Writes go through a temporary file and
an atomic rename, so a concurrent reader sees the old entry or the new one.

Only answers in which every source loaded and every plugin validated are kept; a listing
with any third-party failure removes the entry. A failure is often not a function of the
key: an import that timed out on a busy machine, a worker killed for memory, a module that
is missing until the user installs it into a directory the key does not cover. Keeping
successes only means a stale entry can at worst hide a new failure until the key changes or
`--fresh`, never repeat a failure that is gone; and a user fixing a broken drop-in gets a
fresh answer at every run while it is broken.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import site
import sys
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pulsar_lens
from pulsar_lens.plugins.isolation import Limits
from pulsar_lens.plugins.sources import Source

__all__ = ["FILE_NAME", "FORMAT", "ListingCache", "key_of"]

log = logging.getLogger(__name__)

FORMAT = 1
"""The entry's layout; a new one is a miss for the old entries."""
FILE_NAME = "plugin-listing.json"
CONTRACT = (
    Path(pulsar_lens.__file__).parent / "api.py",
    Path(pulsar_lens.__file__).parent / "api_types.py",
    Path(__file__).parent / "validation.py",
)


@dataclass(frozen=True)
class ListingCache:
    """The cache file and the key this run's answers would be kept under (None when the key
    could not be made: nothing is read or kept then)."""

    path: Path
    key: str | None

    @classmethod
    def for_sources(
        cls, cache_dir: Path, probes: Sequence[Source], dirs: Sequence[Path], limits: Limits
    ) -> ListingCache:
        return cls(Path(cache_dir) / FILE_NAME, key_of(probes, dirs, limits))

    def read(self) -> dict[str, Any] | None:
        """The answers kept under this key, by source, as written; None on a miss."""
        if self.key is None:
            return None
        try:
            entry = json.loads(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return None
        except (OSError, UnicodeDecodeError, ValueError) as exc:
            log.info("the plugin listing cache %s is unreadable (%s); asking again", self.path, exc)
            return None
        if not isinstance(entry, dict) or entry.get("format") != FORMAT:
            return None
        if entry.get("key") != self.key or not isinstance(entry.get("answers"), dict):
            return None
        answers: dict[str, Any] = entry["answers"]
        return answers

    def write(self, answers: Mapping[str, Any]) -> None:
        """Keep `answers` (JSON values) under this key, replacing the file atomically."""
        if self.key is None:
            return
        text = json.dumps({"format": FORMAT, "key": self.key, "answers": answers}, indent=1)
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(prefix=f".{FILE_NAME}.", dir=self.path.parent)
            try:
                with os.fdopen(fd, "w", encoding="utf-8") as out:
                    out.write(text)
                os.replace(tmp, self.path)
            finally:
                Path(tmp).unlink(missing_ok=True)
        except OSError as exc:
            log.warning("cannot write the plugin listing cache %s: %s", self.path, exc)

    def forget(self) -> None:
        """Remove the entry (a listing with a failure keeps none)."""
        try:
            self.path.unlink(missing_ok=True)
        except OSError as exc:
            log.warning("cannot remove the plugin listing cache %s: %s", self.path, exc)


def key_of(probes: Sequence[Source], dirs: Sequence[Path], limits: Limits) -> str | None:
    """The digest of what the answers for `probes` depend on (see the module docstring);
    None when a drop-in folder cannot be read."""
    try:
        material = {
            "format": FORMAT,
            "pulsar_lens": pulsar_lens.__version__,
            "contract": [_file_digest(p) for p in CONTRACT],
            "python": sys.version,
            "executable": sys.executable,
            "limits": [limits.timeout, limits.memory, limits.import_timeout],
            "sources": [[p.source, p.locator.where, p.attr] for p in probes],
            "folders": [_folder(d) for d in dirs],
            "packages": _package_dirs(),
        }
    except OSError as exc:
        log.info("no plugin listing cache key: %s", exc)
        return None
    text = json.dumps(material, sort_keys=True, separators=(",", ":"))
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()


def _folder(directory: Path) -> list[Any]:
    if not directory.is_dir():
        return [str(directory), None]
    files = []
    for path in sorted(directory.rglob("*.py")):
        if "__pycache__" in path.parts:
            continue
        files.append([str(path.relative_to(directory)), str(path.resolve()), _file_digest(path)])
    return [str(directory.resolve()), files]


def _file_digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _package_dirs() -> list[list[Any]]:
    paths = [*site.getsitepackages(), site.getusersitepackages()]
    return [[p, os.stat(p).st_mtime_ns] for p in paths if os.path.isdir(p)]
