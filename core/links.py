"""Symbolic links below the store's root: never followed.

The root itself may be a link (a volume mounted elsewhere), but below it every folder and
file is the store's own. A link there may point anywhere — another disk, a user's home, a
system folder — so listings leave it out (saying so once per process), writes refuse to go
through it, and retention, compaction and quarantine never reach what it points to.
"""

from __future__ import annotations

import logging
import os
import threading
from pathlib import Path

log = logging.getLogger(__name__)

MAX_WARNED = 10_000  # paths remembered so that each link is reported once, not every read
_warned: set[str] = set()
_warned_lock = threading.Lock()


class LinkRefused(OSError):
    """A symbolic link stands where the store expects a folder or file of its own."""

    def __init__(self, path: Path) -> None:
        self.path = path
        super().__init__(
            f"{path} is a symbolic link; the store never follows links below its root "
            "(replace it with a folder)"
        )


def refuse_link(path: Path) -> Path:
    """`path`, unless it is a symbolic link (dangling or not): then LinkRefused."""
    if path.is_symlink():
        raise LinkRefused(path)
    return path


def refuse_links_below(root: Path, relative: Path) -> None:
    """LinkRefused when a folder or file on the way from `root` to `root/relative` is a link."""
    path = root
    for part in relative.parts:
        path = refuse_link(path / part)


def real_folder(root: Path, relative: Path) -> Path:
    """`root/relative`, each folder on the way made when missing; LinkRefused when one is a
    symbolic link (`mkdir(parents=True)` would follow it out of the store)."""
    root.mkdir(parents=True, exist_ok=True)  # the root itself may be a link
    folder = root
    for part in relative.parts:
        folder = folder / part
        try:
            folder.mkdir()
        except FileExistsError:
            refuse_link(folder)
    return folder


def warn_link(path: str | os.PathLike[str]) -> None:
    """Say, once per process, that a link below the root is left alone."""
    text = os.fspath(path)
    with _warned_lock:
        if text in _warned:
            return
        if len(_warned) >= MAX_WARNED:
            _warned.clear()
        _warned.add(text)
    log.warning("ignoring %s: a symbolic link; the store never follows links below its root", text)


def real_names(folder: Path) -> list[str]:
    """The names in `folder` that are not symbolic links (each link found is reported); none
    when `folder` is missing or is a link itself."""
    if folder.is_symlink():
        warn_link(folder)
        return []
    try:
        with os.scandir(folder) as entries:
            found = list(entries)
    except (FileNotFoundError, NotADirectoryError):
        return []
    names = []
    for entry in found:
        if entry.is_symlink():
            warn_link(entry.path)
        else:
            names.append(entry.name)
    return names
