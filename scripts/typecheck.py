"""mypy strict over the installed names: a link tree `pulsar_lens/` mapped as pyproject.toml
maps the parts (mypy follows no import hook, so it cannot see the editable install's mapping).
Usage: python scripts/typecheck.py [extra mypy arguments].

The link tree and mypy's cache stay in ~/.cache/pulsar-lens/mypy/<this checkout>/ (XDG_CACHE_HOME
is honoured): a cache is only valid for the paths it was made for, and a cold run of the whole
code base takes minutes on a small machine, a warm one seconds. Each checkout has a folder of
its own; the tree is made anew at each run, so a moved or deleted part never lingers."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def work_folder() -> Path:
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    checkout = hashlib.sha256(str(ROOT).encode()).hexdigest()[:16]
    return cache / "pulsar-lens" / "mypy" / checkout


def link_tree(work: Path, mapping: dict[str, str]) -> Path:
    """`work`/pulsar_lens: the top-level modules and one link per part of `mapping` (the
    package-dir of pyproject.toml)."""
    package = work / "pulsar_lens"
    shutil.rmtree(package, ignore_errors=True)
    package.mkdir(parents=True)
    for source in (ROOT / mapping["pulsar_lens"]).glob("*.py"):
        (package / source.name).symlink_to(source)
    for name, folder in mapping.items():
        if name != "pulsar_lens":
            (package / name.split(".", 1)[1]).symlink_to(ROOT / folder)
    return package


def main(argv: list[str]) -> int:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    checked: list[str] = config["tool"]["mypy"]["files"]
    work = work_folder()
    package = link_tree(work, config["tool"]["setuptools"]["package-dir"])
    files = [str(package / p.name) for p in sorted(package.glob("*.py"))]
    files += [str(package / part) for part in checked]
    mypy = [sys.executable, "-m", "mypy", "--config-file", str(ROOT / "pyproject.toml")]
    mypy += ["--cache-dir", str(work / "cache")]
    return subprocess.run([*mypy, *argv, *files], cwd=work, check=False).returncode


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
