"""Only `pulsar_lens.core.settings` reads or writes the process environment.

Every other module of the package gets its settings as arguments (or the mapping the settings
module hands it), so what a command, a plugin or a child process sees is what its caller chose.
This scans each module's syntax tree for `os.environ`, `os.getenv`, `os.putenv`,
`os.unsetenv`, `os.environb` and `from os import environ` (and the like), and names the file
and line of each. Tests, benchmarks and scripts may set variables to drive a process.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PARTS = ("core", "collectors", "lab", "plugins", "exporter", "dashboard", "cli", "pulsar_lens")
SETTINGS_MODULE = Path("core/settings.py")
ENVIRONMENT = frozenset({"environ", "environb", "getenv", "getenvb", "putenv", "unsetenv"})

ALLOWED: dict[Path, str] = {}
"""Modules still touching the environment themselves, each with why: this list only shrinks."""


def environment_uses(path: Path) -> list[int]:
    """The lines of `path` that touch the process environment through `os`."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    os_names = {"os"}
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            os_names |= {a.asname or a.name for a in node.names if a.name in ("os", "posix")}
        elif isinstance(node, ast.ImportFrom) and node.module in ("os", "posix"):
            lines += [node.lineno for a in node.names if a.name in ENVIRONMENT]
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Attribute)
            and node.attr in ENVIRONMENT
            and isinstance(node.value, ast.Name)
            and node.value.id in os_names
        ):
            lines.append(node.lineno)
    return sorted(lines)


def package_modules() -> list[Path]:
    return sorted(p.relative_to(ROOT) for part in PARTS for p in (ROOT / part).rglob("*.py"))


def test_only_the_settings_module_touches_the_environment() -> None:
    offenders = [
        f"{path}:{line}"
        for path in package_modules()
        if path != SETTINGS_MODULE and path not in ALLOWED
        for line in environment_uses(ROOT / path)
    ]
    assert not offenders, "read or write the environment in core/settings.py only: " + ", ".join(
        offenders
    )


def test_the_settings_module_is_found_reading_it() -> None:
    """The scan sees what it looks for (else the test above would pass on nothing)."""
    assert len(package_modules()) > 100
    assert environment_uses(ROOT / SETTINGS_MODULE)


def test_the_scan_finds_every_form(tmp_path: Path) -> None:
    sample = tmp_path / "sample.py"
    sample.write_text(
        "import os\nimport os as o\nfrom os import getenv, path\n"
        "a = os.environ['X']\nb = o.getenv('Y')\nos.putenv('Z', '1')\nc = os.path.join('a')\n"
    )
    assert environment_uses(sample) == [3, 4, 5, 6]


def test_the_allowed_list_names_only_modules_that_still_need_it() -> None:
    stale = [str(p) for p in ALLOWED if not environment_uses(ROOT / p)]
    assert not stale, f"no longer touch the environment: drop them from ALLOWED: {stale}"
