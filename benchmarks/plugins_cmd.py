"""`pulsar-lens plugins`: the wall time of the command, each run a fresh process.

    .venv/bin/python -m benchmarks.plugins_cmd [--rounds 5] [--bound 2.0] [--check]

Three cases: the built-ins alone, and with a drop-in folder (the docs' example plugin, which
is imported in a worker process only) cold and warm. Cold: the listing cache is empty, a new
cache folder for each run, so the worker imports the drop-in; warm: the cache holds the
answers of an earlier run, and no worker starts. The baseline, measured in the same run, is
an interpreter that imports what listing plugins cannot do without (pandas, pydantic,
pyarrow): `ratio` is the command's time over it. Each figure is the median of `--rounds`
runs after one unmeasured run (bytecode compiled into a temporary cache, as an installed
package has it; for the warm case, it also fills the listing cache); `cpu` is the user+system
time of the process and its children. `--check` exits 1 when the built-ins' or the warm
listing's median is over `--bound` seconds; the cold one is reported, not checked (its worker
preloads pandas, pyarrow, altair and the API before it can import the drop-in). The load
average at the start and the end is printed too: on a shared machine it says what the
figures are worth.
"""

from __future__ import annotations

import argparse
import itertools
import shutil
import statistics
import sys
import tempfile
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from benchmarks.commands import bytecode_env, load, timed

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "drop-in" / "backlog_top.py"
LENS = [sys.executable, "-m", "pulsar_lens.cli.main", "plugins"]
BASELINE = [sys.executable, "-c", "import pandas, pydantic, pyarrow"]


def median_of(
    argv: Sequence[str], envs: Callable[[], Mapping[str, str]], rounds: int
) -> tuple[float, float]:
    """Medians over `rounds` runs, each in the environment `envs()` makes for it."""
    timed(argv, envs())  # compiles into the bytecode cache; not measured
    runs = [timed(argv, envs()) for _ in range(rounds)]
    return statistics.median(w for w, _ in runs), statistics.median(c for _, c in runs)


def environment(pycache: Path, plugin_dirs: str, cache_dir: Path) -> dict[str, str]:
    env = bytecode_env(pycache)
    env["PULSAR_LENS_PLUGIN_DIRS"] = plugin_dirs
    env["PULSAR_LENS_CACHE_DIR"] = str(cache_dir)
    return env


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--bound", type=float, default=2.0, help="seconds a case may take")
    parser.add_argument("--check", action="store_true", help="exit 1 over the bound")
    args = parser.parse_args(argv)
    print(f"load average at the start: {load()}")
    with tempfile.TemporaryDirectory(prefix="lens-plugins-bench-") as tmp:
        pycache, folder, warm = Path(tmp) / "pycache", Path(tmp) / "plugins", Path(tmp) / "warm"
        folder.mkdir()
        shutil.copy(EXAMPLE, folder / EXAMPLE.name)
        colds = itertools.count()

        def cold() -> dict[str, str]:  # an empty listing cache for each run
            return environment(pycache, str(folder), Path(tmp) / f"cold-{next(colds)}")

        base_wall, base_cpu = median_of(
            BASELINE, lambda: environment(pycache, "", warm), args.rounds
        )
        print(
            f"baseline (import pandas, pydantic, pyarrow)  {base_wall:6.2f}s  cpu {base_cpu:.2f}s"
        )
        over = False
        cases: list[tuple[str, Callable[[], Mapping[str, str]], bool]] = [
            ("built-ins", lambda: environment(pycache, "", Path(tmp) / "builtins"), True),
            ("built-ins + a drop-in, cold", cold, False),
            ("built-ins + a drop-in, warm", lambda: environment(pycache, str(folder), warm), True),
        ]
        for case, envs, checked in cases:
            wall, cpu = median_of(LENS, envs, args.rounds)
            over |= checked and wall > args.bound
            within = f"within {args.bound:g}s: {wall <= args.bound}" + (
                "" if checked else " (not checked)"
            )
            print(
                f"plugins, {case:<28} {wall:6.2f}s  cpu {cpu:.2f}s  "
                f"ratio {wall / base_wall:.2f}  {within}"
            )
    print(f"load average at the end: {load()}")
    return 1 if args.check and over else 0


if __name__ == "__main__":
    sys.exit(main())
