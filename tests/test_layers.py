"""The house's floors, read from the code's own imports under the installed names.

Every part of `pulsar_lens` sits on a floor; an import (at module level or inside a function)
may only go to the same part or down. And no module waits on itself through a chain of
module-level imports. The mapping of parts to folders is pyproject.toml's.
"""

from __future__ import annotations

import ast
import tomllib
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# lowest first: a part imports only parts before it (and itself)
FLOORS = (
    "pulsar_lens",  # the version: pulsar_lens/__init__.py
    "core",  # the domain: no streamlit, requests or pyspark
    "api",  # the plugin contract, pulsar_lens/api.py and the values it re-exports (api_types.py)
    "collectors",
    "lab",
    "plugins",
    "exporter",
    "dashboard",
    "cli",
    "__main__",  # python -m pulsar_lens
)


def modules() -> Iterator[tuple[str, str, Path]]:
    """(module name, part, file) for every module of the distribution."""
    mapping = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    for package, folder in mapping["package-dir"].items():
        for path in sorted((ROOT / folder).rglob("*.py")):
            rel = path.relative_to(ROOT / folder).with_suffix("").parts
            if rel[-1] == "__init__":
                rel = rel[:-1]
            name = ".".join((package, *rel))
            if package == "pulsar_lens":
                part = {
                    "pulsar_lens": "pulsar_lens",
                    "pulsar_lens.api": "api",
                    "pulsar_lens.api_types": "api",
                }.get(name, "__main__")
            else:
                part = package.split(".", 1)[1]
            yield name, part, path


def imports(tree: ast.Module, *, top_level_only: bool) -> Iterator[tuple[str, int]]:
    nodes = tree.body if top_level_only else list(ast.walk(tree))
    for node in nodes:
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            yield node.module, node.lineno
            for alias in node.names:
                yield f"{node.module}.{alias.name}", node.lineno
        elif isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, node.lineno


def part_of(module: str, parts: dict[str, str]) -> str | None:
    while module:
        if module in parts:
            return parts[module]
        module = module.rpartition(".")[0]
    return None


def test_layers_every_import_goes_down_or_stays() -> None:
    found = list(modules())
    parts = {name: part for name, part, _ in found}
    assert set(parts.values()) == set(FLOORS), set(parts.values()) ^ set(FLOORS)
    climbs = []
    for _name, part, path in found:
        tree = ast.parse(path.read_text(), str(path))
        for target, line in imports(tree, top_level_only=False):
            to = part_of(target, parts) if target.startswith("pulsar_lens") else None
            if to is not None and FLOORS.index(to) > FLOORS.index(part):
                climbs.append(f"{path.relative_to(ROOT)}:{line}: {part} imports {target}")
    assert not climbs, "imports that climb back up:\n" + "\n".join(sorted(set(climbs)))


def test_layers_no_module_imports_itself_through_others() -> None:
    found = list(modules())
    names = {name for name, _, _ in found}
    graph: dict[str, set[str]] = {}
    for name, _part, path in found:
        tree = ast.parse(path.read_text(), str(path))
        graph[name] = {
            target
            for target, _ in imports(tree, top_level_only=True)
            if target in names and target != name
        }
    circles = _circles(graph)
    assert not circles, "import circles: " + "; ".join(" -> ".join(c) for c in circles)


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for start in graph:
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is None:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        top = stack.pop()
                        on_stack.discard(top)
                        component.append(top)
                        if top == node:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
            elif child not in index:
                index[child] = low[child] = counter
                counter += 1
                stack.append(child)
                on_stack.add(child)
                work.append((child, iter(sorted(graph[child]))))
            elif child in on_stack:
                low[node] = min(low[node], index[child])
    return found
