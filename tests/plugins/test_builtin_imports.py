"""Built-in analyses share through a door, not a window: each imports its own package and
`pulsar_lens.plugins.builtin.shared`, never another built-in's package (it reads another's
output through `requires`), and `shared` imports no built-in at all."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

import pulsar_lens.plugins.builtin as builtin

BUILTIN = Path(builtin.__file__).parent
PREFIX = "pulsar_lens.plugins.builtin"
SHARED = "shared"


def _home(path: Path) -> str:
    """The built-in a file belongs to: its folder under builtin/, or the module's own name."""
    parts = path.relative_to(BUILTIN).with_suffix("").parts
    return parts[0]


def _package_of(path: Path) -> list[str]:
    """The dotted package a file's relative imports start from."""
    parts = path.relative_to(BUILTIN).with_suffix("").parts
    return [*PREFIX.split("."), *parts[:-1]]


def _imported(path: Path, source: str) -> Iterator[tuple[int, str]]:
    """(line, module) of every import in a file, relative ones resolved, `from a import b`
    also as `a.b` (b may be a module)."""
    tree = ast.parse(source, filename=str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            base = _package_of(path)
            if node.level:
                base = base[: len(base) - (node.level - 1)]
                module = ".".join([*base, *([node.module] if node.module else [])])
            else:
                module = node.module or ""
            yield node.lineno, module
            for alias in node.names:
                yield node.lineno, f"{module}.{alias.name}"


def _builtin_target(module: str) -> str | None:
    """The built-in a dotted name reaches into, or None when it is outside builtin/."""
    if not module.startswith(PREFIX + "."):
        return None
    return module[len(PREFIX) + 1 :].split(".")[0]


def _crossings(path: Path, source: str) -> list[str]:
    home = _home(path)
    allowed = {SHARED} if home == SHARED else {home, SHARED}
    found = []
    for line, module in _imported(path, source):
        target = _builtin_target(module)
        if target is not None and target not in allowed and target != "BUILTIN_PLUGINS":
            found.append(f"{path.relative_to(BUILTIN)}:{line} imports {module}")
    return found


FILES = sorted(p for p in BUILTIN.rglob("*.py") if p.name != "__init__.py" or p.parent != BUILTIN)


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(BUILTIN)))
def test_builtin_imports_no_other_builtin(path: Path) -> None:
    assert _crossings(path, path.read_text(encoding="utf-8")) == []


def test_builtin_imports_scan_sees_a_crossing() -> None:
    """The scan is not blind: a file that reaches into another built-in is caught, whether it
    names the module or imports it from the package, and an import of its own is not."""
    sneaky = BUILTIN / "unload_history" / "reference.py"
    source = (
        "from pulsar_lens.plugins.builtin.unload_latency.outages import ladder\n"
        "from pulsar_lens.plugins.builtin import bundle_ownership\n"
        "from pulsar_lens.plugins.builtin.unload_history.frames import TOP\n"
        "from . import plan\n"
        "from ..failover_assignment import frames\n"
    )
    found = _crossings(sneaky, source)
    assert [f.split(" imports ")[1] for f in found] == [
        "pulsar_lens.plugins.builtin.unload_latency.outages",
        "pulsar_lens.plugins.builtin.unload_latency.outages.ladder",
        "pulsar_lens.plugins.builtin.bundle_ownership",
        "pulsar_lens.plugins.builtin.failover_assignment",
        "pulsar_lens.plugins.builtin.failover_assignment.frames",
    ]


def test_builtin_imports_shared_is_no_plugin() -> None:
    """`shared` is a module of code, never registered as an analysis."""
    assert not any(ref.split(":")[0].endswith(".shared") for ref in builtin.BUILTIN_PLUGINS)
    assert (BUILTIN / SHARED / "__init__.py").read_text(encoding="utf-8").startswith('"""')
