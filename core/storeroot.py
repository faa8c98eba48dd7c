"""Whether a path can be a store's root, checked once when a command starts.

A command handed a file, a folder it cannot list or write, or a path it cannot create says
so in one line and stops, instead of failing on every poll (or with a traceback) later.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from pulsar_lens.core.errors import SnapshotError

HOW_TO_FIX = "point --store or PULSAR_LENS_STORE at a folder"


def check_root(root: str | os.PathLike[str], *, writable: bool) -> Path:
    """`root` as a Path; SnapshotError in one line when it cannot be a store: not a folder (a
    file, a link to nothing, a path below a file), not listable, or (`writable`) a folder
    that cannot be written or made. A missing root is not made here: that is for the first
    write, or for the command to report as an empty store."""
    path = Path(root)
    try:
        return _check(path, writable=writable)
    except OSError as exc:  # e.g. a name too long for the file system
        raise SnapshotError(
            f"cannot use the store {path}: {_why(exc)}; {HOW_TO_FIX}", path=path
        ) from None


def _check(path: Path, *, writable: bool) -> Path:
    if path.is_symlink() and not path.exists():
        raise SnapshotError(f"the store {path} is a link to nothing; {HOW_TO_FIX}", path=path)
    if not path.exists():
        above = next((p for p in path.parents if p.exists()), None)
        if above is not None and not above.is_dir():  # it can never be made
            raise SnapshotError(
                f"the store {path} is below {above}, not a folder; {HOW_TO_FIX}", path=path
            )
        if writable and above is not None and not os.access(above, os.W_OK | os.X_OK):
            raise SnapshotError(
                f"cannot create the store {path}: {above} is not writable; {HOW_TO_FIX}", path=path
            )
        return path  # made by the first write: a run that stores nothing leaves no folder
    if not path.is_dir():
        raise SnapshotError(f"the store {path} is not a folder; {HOW_TO_FIX}", path=path)
    try:
        with os.scandir(path) as entries:
            next(entries, None)
    except OSError as exc:
        raise SnapshotError(
            f"cannot read the store {path}: {_why(exc)}; {HOW_TO_FIX}", path=path
        ) from None
    if writable:
        _probe_write(path)
    return path


def _probe_write(path: Path) -> None:
    """A file made and removed: permissions alone miss read-only mounts and full quotas."""
    try:
        fd, name = tempfile.mkstemp(prefix=".write-check-", suffix=".tmp", dir=path)
    except OSError as exc:
        raise SnapshotError(
            f"cannot write in the store {path}: {_why(exc)}; {HOW_TO_FIX}", path=path
        ) from None
    os.close(fd)
    os.unlink(name)


def _why(exc: OSError) -> str:
    return exc.strerror or str(exc)
