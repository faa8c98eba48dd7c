"""`pulsar-lens plugins`: the wall time of the command, each run a fresh process.

    .venv/bin/python -m benchmarks.plugins_cmd [--rounds 5] [--bound 2.0] [--check]

Two cases: the built-ins alone, and with a drop-in folder (the docs' example plugin, which
is imported in a worker process first). The baseline, measured in the same run, is an
interpreter that imports what listing plugins cannot do without (pandas, pydantic,
pyarrow): `ratio` is the command's time over it. Each figure is the median of `--rounds`
runs after one unmeasured run (bytecode compiled into a temporary cache, as an installed
package has it); `cpu` is the user+system time of the process and its children. `--check`
exits 1 when a case's median is over `--bound` seconds.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "drop-in" / "backlog_top.py"
LENS = [sys.executable, "-m", "pulsar_lens.cli.main", "plugins"]
BASELINE = [sys.executable, "-c", "import pandas, pydantic, pyarrow"]


def timed(argv: Sequence[str], env: Mapping[str, str]) -> tuple[float, float]:
    """Wall and CPU seconds of one run of `argv` (which must succeed)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    subprocess.run(argv, env=dict(env), check=True, stdout=subprocess.DEVNULL, timeout=300)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def median_of(argv: Sequence[str], env: Mapping[str, str], rounds: int) -> tuple[float, float]:
    timed(argv, env)  # compiles into the bytecode cache; not measured
    runs = [timed(argv, env) for _ in range(rounds)]
    return statistics.median(w for w, _ in runs), statistics.median(c for _, c in runs)


def environment(cache: Path, plugin_dirs: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPYCACHEPREFIX"] = str(cache)
    env["PULSAR_LENS_PLUGIN_DIRS"] = plugin_dirs
    return env


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--bound", type=float, default=2.0, help="seconds a case may take")
    parser.add_argument("--check", action="store_true", help="exit 1 over the bound")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="lens-plugins-bench-") as tmp:
        cache, folder = Path(tmp) / "pycache", Path(tmp) / "plugins"
        folder.mkdir()
        shutil.copy(EXAMPLE, folder / EXAMPLE.name)
        base_wall, base_cpu = median_of(BASELINE, environment(cache, ""), args.rounds)
        print(
            f"baseline (import pandas, pydantic, pyarrow)  {base_wall:6.2f}s  cpu {base_cpu:.2f}s"
        )
        over = False
        for case, dirs in (("built-ins", ""), ("built-ins + a drop-in", str(folder))):
            wall, cpu = median_of(LENS, environment(cache, dirs), args.rounds)
            over |= wall > args.bound
            print(
                f"plugins, {case:<22} {wall:6.2f}s  cpu {cpu:.2f}s  "
                f"ratio {wall / base_wall:.2f}  within {args.bound:g}s: {wall <= args.bound}"
            )
    return 1 if args.check and over else 0


if __name__ == "__main__":
    sys.exit(main())
