"""Only `pulsar_lens.core.settings` reads or writes the process environment, and only entry
points ask it to.

Every other module of the package gets its settings as arguments, so what a command, a plugin
or a child process sees is what its caller chose. This scans each module's syntax tree for
`os.environ`, `os.getenv`, `os.putenv`, `os.unsetenv`, `os.environb` and `from os import
environ` (and the like), and names the file and line of each. It also holds the list of the
modules that call `process_environ()` or load the settings from the process environment
(`Settings.from_env()` without a mapping): the entry points, so that a function deep in the
code cannot start reading the environment again. Tests, benchmarks and scripts may set
variables to drive a process.
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


PROCESS_ENVIRON_CALLERS: dict[Path, str] = {
    SETTINGS_MODULE: "the loader: `Settings.from_env` reads the environment once",
    Path("cli/main.py"): "`pulsar-lens`: every credential-looking variable, ours or not, is "
    "registered for redaction before the command runs",
    Path("cli/healthcheck.py"): "the image's health check, run every 30 s: it reads the "
    "metrics port and address alone, without loading the settings file",
    Path("lab/runtime.py"): "the local Pulsar's JDK and download cache (JAVA_HOME, "
    "XDG_CACHE_HOME, PULSAR_LENS_CACHE_DIR): the machine's, for the demo and the tests",
}
"""Modules that call `process_environ()`, each with why: this list only shrinks."""

SETTINGS_LOADERS: dict[Path, str] = {
    Path("cli/main.py"): "`pulsar-lens`: loads the settings once and hands them to the command",
    Path("cli/arguments.py"): "`settings_of`: a command run without `main` loads its own",
    Path("dashboard/data.py"): "the dashboard's page script, run anew by Streamlit each time",
    Path("plugins/spark/worker.py"): "the Spark job worker's main, from what collect handed it",
}
"""Modules that load the settings from the process environment (`Settings.from_env()` with
no mapping), each an entry point, with why."""


def calls_of(path: Path, name: str, *, without_mapping: bool = False) -> list[int]:
    """The lines of `path` that call a function or method named `name`; `without_mapping`:
    only the calls given no positional argument and no `environ=`."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    lines = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        called = func.id if isinstance(func, ast.Name) else getattr(func, "attr", None)
        if called != name:
            continue
        if without_mapping and (node.args or any(k.arg == "environ" for k in node.keywords)):
            continue
        lines.append(node.lineno)
    return sorted(lines)


def settings_loads(path: Path) -> list[int]:
    """The lines of `path` that load `Settings` from the process environment (`from_env()`
    without a mapping, or `current()`)."""
    text = path.read_text(encoding="utf-8")
    if "Settings" not in text:
        return []
    tree = ast.parse(text, filename=str(path))
    return sorted(
        node.lineno
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and isinstance(node.func.value, ast.Name)
        and node.func.value.id in ("Settings", "cls")
        and (
            node.func.attr == "current"
            or (
                node.func.attr == "from_env"
                and not node.args
                and not any(k.arg == "environ" for k in node.keywords)
            )
        )
    )


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


def test_only_entry_points_call_process_environ() -> None:
    offenders = [
        f"{path}:{line}"
        for path in package_modules()
        if path not in PROCESS_ENVIRON_CALLERS
        for line in calls_of(ROOT / path, "process_environ")
    ]
    assert not offenders, (
        "take the settings (or their part) as an argument; only entry points call "
        "process_environ(): " + ", ".join(offenders)
    )


def test_only_entry_points_load_the_settings_from_the_environment() -> None:
    offenders = [
        f"{path}:{line}"
        for path in package_modules()
        if path not in SETTINGS_LOADERS and path != SETTINGS_MODULE
        for line in settings_loads(ROOT / path)
    ]
    assert not offenders, (
        "take the settings as an argument; only entry points call Settings.from_env() "
        "without a mapping: " + ", ".join(offenders)
    )


def test_the_entry_point_lists_name_only_modules_that_still_need_them() -> None:
    stale = [str(p) for p in PROCESS_ENVIRON_CALLERS if not calls_of(ROOT / p, "process_environ")]
    stale += [str(p) for p in SETTINGS_LOADERS if not settings_loads(ROOT / p)]
    assert not stale, f"no longer read the environment: drop them from the lists: {stale}"


def test_the_call_scans_find_what_they_look_for(tmp_path: Path) -> None:
    sample = tmp_path / "sample.py"
    sample.write_text(
        "from x import Settings, process_environ, settings\n"
        "a = process_environ()\nb = settings.process_environ().get('X')\n"
        "c = Settings.from_env()\nd = Settings.from_env({})\n"
        "e = Settings.from_env(config='f')\nf = Settings.from_env(environ={})\n"
        "g = Settings.current()\n"
    )
    assert calls_of(sample, "process_environ") == [2, 3]
    assert settings_loads(sample) == [4, 6, 8]
