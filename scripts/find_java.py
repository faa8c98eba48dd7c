"""Exit 0 when a Java the harness accepts for every tested release is installed
(lab.runtime.find_java's rule per release of TESTED_RELEASES), else 1.

Run by scripts/setup.sh with the system's python3, before any virtualenv exists: it maps the
installed names (`pulsar_lens.core`, `pulsar_lens.lab`) onto the repository's folders, as
pyproject.toml does, so the one rule in lab/runtime.py serves here too (it needs only the
standard library)."""

from __future__ import annotations

import importlib.machinery
import sys
import tomllib
import types
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main() -> int:
    mapping = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    for name, folder in mapping["package-dir"].items():
        module = types.ModuleType(name)
        module.__path__ = [str(ROOT / folder)]
        module.__spec__ = importlib.machinery.ModuleSpec(name, None, is_package=True)
        sys.modules[name] = module
    from pulsar_lens.lab.runtime import TESTED_RELEASES, find_java

    for version in TESTED_RELEASES:
        try:
            find_java(version)
        except Exception as exc:  # any refusal means: install one
            print(f"setup: {exc}", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
