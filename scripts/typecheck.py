"""mypy strict over the installed names: a link tree `pulsar_lens/` in a temporary folder,
mapped as pyproject.toml maps the parts (mypy follows no import hook, so it cannot see the
editable install's mapping). Usage: python scripts/typecheck.py [extra mypy arguments]."""

from __future__ import annotations

import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main(argv: list[str]) -> int:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    mapping: dict[str, str] = config["tool"]["setuptools"]["package-dir"]
    checked: list[str] = config["tool"]["mypy"]["files"]
    with tempfile.TemporaryDirectory(prefix="pulsar-lens-mypy-") as tmp:
        package = Path(tmp, "pulsar_lens")
        package.mkdir()
        for source in (ROOT / mapping["pulsar_lens"]).glob("*.py"):
            (package / source.name).symlink_to(source)
        for name, folder in mapping.items():
            if name != "pulsar_lens":
                (package / name.split(".", 1)[1]).symlink_to(ROOT / folder)
        files = [str(package / p.name) for p in package.glob("*.py")]
        files += [str(package / part) for part in checked]
        mypy = [sys.executable, "-m", "mypy", "--config-file", str(ROOT / "pyproject.toml")]
        return subprocess.run([*mypy, *argv, *files], cwd=tmp, check=False).returncode


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
