"""Where third-party plugins come from: the entry points of installed packages and the `*.py`
files of the drop-in folders, and how one source's module becomes plugin candidates.

`discover()` imports a source in the calling process (after a worker imported it first);
the listing of `pulsar-lens plugins` imports it only in that worker. Both go through
`sources()`, `candidates_of()` and the failures made here, so both say the same.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib
import importlib.metadata
import importlib.util
import re
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pulsar_lens.core.errors import PluginLoadError, PluginRunError, origin_of
from pulsar_lens.plugins import isolation
from pulsar_lens.plugins.isolation import ENTRY_POINT_GROUP, PLUGIN_DIRS_ENV, Locator

__all__ = [
    "Source",
    "candidates_of",
    "entry_point_sources",
    "folder_sources",
    "import_failure",
    "import_in_process",
    "module_name",
    "refused",
    "resolve",
    "sources",
]


@dataclass(frozen=True)
class Source:
    """One module of third-party code: an entry point's module or a drop-in file."""

    source: str  # "entry point n = m:C (dist 1.0)", or the file's path
    locator: Locator  # where a worker imports the module from
    attr: str = ""  # an entry point's object within its module ("C", "a.B"); "" for a file
    home: str | None = None  # a drop-in's file: where its author looks for a failure

    @property
    def is_file(self) -> bool:
        return self.locator.kind == "file"


def sources(*, entry_points: bool, dirs: Sequence[Path]) -> list[Source | PluginLoadError]:
    """Every third-party source in discovery order: the entry points, then each folder's
    files by name; a folder that does not exist, or a file linking outside its folder, is a
    failure in its place."""
    found: list[Source | PluginLoadError] = []
    if entry_points:
        found.extend(entry_point_sources())
    for directory in dirs:
        found.extend(folder_sources(directory))
    return found


def entry_point_sources() -> Iterator[Source]:
    for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
        dist = f" ({ep.dist.name} {ep.dist.version})" if ep.dist is not None else ""
        module = ep.module.strip()
        yield Source(
            f"entry point {ep.name} = {ep.value}{dist}",
            Locator("module", module, module),
            attr=(ep.attr or "").strip(),
        )


def folder_sources(directory: Path) -> Iterator[Source | PluginLoadError]:
    if not directory.is_dir():
        yield PluginLoadError(
            str(directory), f"{PLUGIN_DIRS_ENV} names a directory that does not exist"
        )
        return
    root = directory.resolve()
    for path in sorted(directory.glob("*.py")):
        if path.name.startswith(("_", ".")):
            continue
        if not path.resolve().is_relative_to(root):
            yield PluginLoadError(
                str(path),
                f"a link to {path.resolve()}, outside the plugin folder; refused (copy the "
                "file into the folder, or list its own folder in PULSAR_LENS_PLUGIN_DIRS)",
            )
            continue
        yield Source(str(path), Locator("file", str(path), module_name(path)), home=str(path))


def module_name(path: Path) -> str:
    digest = hashlib.sha256(str(path.resolve()).encode()).hexdigest()[:12]
    return f"{isolation.DROPIN_PREFIX}{re.sub(r'[^0-9a-zA-Z_]', '_', path.stem)}_{digest}"


def import_in_process(found: Source) -> Any:
    """The source's object, imported in this process: an entry point's named object, or a
    drop-in's module."""
    if found.is_file:
        return resolve(found, _import_file(Path(found.locator.where), found.locator.module_name))
    with contextlib.redirect_stdout(sys.stderr):  # a print at import must not reach --json
        module = importlib.import_module(found.locator.where)
    return resolve(found, module)


def resolve(found: Source, module: Any) -> Any:
    """The object `found` names in its imported `module`: the module itself for a drop-in."""
    obj = module
    for part in found.attr.split(".") if found.attr else ():
        obj = getattr(obj, part)
    return obj


def candidates_of(found: Source, obj: Any) -> list[tuple[str, Any]]:
    """The (source, class) pairs the source's object stands for: a drop-in's `PLUGINS`, an
    entry point's class or list. PluginLoadError when a drop-in has no `PLUGINS`."""
    if found.is_file:
        listed = getattr(obj, "PLUGINS", None)
        if listed is None:
            raise PluginLoadError(
                found.source,
                "expected a module-level PLUGINS tuple listing the plugin classes; found none",
            )
        obj = listed
    return list(_expand(found.source, obj))


def _expand(source: str, obj: Any) -> Iterator[tuple[str, Any]]:
    """A class stands for itself; a list or tuple stands for each of its items."""
    if isinstance(obj, list | tuple):
        for item in obj:
            name = getattr(item, "__qualname__", repr(item))
            yield f"{source} [{name}]" if len(obj) > 1 else source, item
    else:
        yield source, obj


def _import_file(path: Path, module_name: str) -> Any:
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot import {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    try:
        with contextlib.redirect_stdout(sys.stderr):  # a print at import must not reach --json
            spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(module_name, None)
        raise
    return module


def refused(source: str, refusal: PluginRunError) -> PluginLoadError:
    """The load failure of a file or module whose import failed in a worker."""
    return PluginLoadError(source, f"import failed: {refusal.detail}", origin=refusal.origin)


def import_failure(source: str, exc: BaseException, *, home: str | None = None) -> PluginLoadError:
    """`exc` raised importing a plugin; `home` (a drop-in's file) is where its author looks."""
    error = PluginLoadError(
        source, f"import failed: {type(exc).__name__}: {exc}", origin=origin_of(exc, home=home)
    )
    error.__cause__ = exc
    return error
