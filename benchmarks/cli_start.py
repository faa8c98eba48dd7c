"""`pulsar-lens` start-up: what a command costs before it does anything, each run a fresh process.

    .venv/bin/python -m benchmarks.cli_start [--rounds 5]

Four cases that parse arguments and stop: `--version`, `--help`, `collect --help` and
`config --help`, beside two baselines measured in the same rounds: a bare interpreter
(`python -c pass`) and one that imports argparse, which is what parsing cannot do without.
The rounds run every case and baseline in turn, so a busy machine weighs on all alike.

Cold: a new, empty bytecode cache (PYTHONPYCACHEPREFIX) for each run, so every module is
compiled first, as on the first start after an install without compiled files; warm: one
cache for all runs, filled by an unmeasured run before them, as an installed package has it.
PYTHONDONTWRITEBYTECODE is dropped from the environment, else warm would be cold too.

Each figure is the median of `--rounds` runs: wall seconds, `cpu` (user+system of the
process), and `ratio` (wall over the argparse baseline's of the same mode). The runs
themselves are printed after the medians, and the load average at the start and the end:
on a shared machine it says what the figures are worth. Nothing is checked: the structural
test (tests/cli/test_cli_imports.py) is what keeps parsing light.
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import sys
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path

from benchmarks.commands import bytecode_env, load, timed

LENS = [sys.executable, "-m", "pulsar_lens.cli.main"]
BASELINES: dict[str, list[str]] = {
    "python -c pass": [sys.executable, "-c", "pass"],
    "python -c 'import argparse'": [sys.executable, "-c", "import argparse"],
}
CASES: dict[str, list[str]] = {
    "pulsar-lens --version": [*LENS, "--version"],
    "pulsar-lens --help": [*LENS, "--help"],
    "pulsar-lens collect --help": [*LENS, "collect", "--help"],
    "pulsar-lens config --help": [*LENS, "config", "--help"],
}
ARGPARSE = "python -c 'import argparse'"
MODES = ("cold", "warm")


def measure(rounds: int, tmp: Path) -> dict[tuple[str, str], list[tuple[float, float]]]:
    """Every (mode, case) -> its runs, the cases and baselines taking turns in each round."""
    everything = {**BASELINES, **CASES}
    warm = tmp / "warm"
    fresh = itertools.count()
    for argv in everything.values():
        timed(argv, bytecode_env(warm))  # fills the warm cache; not measured
    runs: dict[tuple[str, str], list[tuple[float, float]]] = {
        (mode, name): [] for mode in MODES for name in everything
    }
    for _ in range(rounds):
        for name, argv in everything.items():
            runs["cold", name].append(timed(argv, bytecode_env(tmp / f"cold-{next(fresh)}")))
            runs["warm", name].append(timed(argv, bytecode_env(warm)))
    return runs


def report(runs: Mapping[tuple[str, str], list[tuple[float, float]]]) -> None:
    for mode in MODES:
        base = statistics.median(w for w, _ in runs[mode, ARGPARSE])
        print(f"{mode}:")
        for name in (*BASELINES, *CASES):
            done = runs[mode, name]
            wall = statistics.median(w for w, _ in done)
            cpu = statistics.median(c for _, c in done)
            print(f"  {name:<30} {wall:6.3f}s  cpu {cpu:.3f}s  ratio {wall / base:.2f}")
    print("runs (wall/cpu seconds):")
    for (mode, name), done in runs.items():
        shown = " ".join(f"{w:.3f}/{c:.3f}" for w, c in done)
        print(f"  {mode} {name:<30} {shown}")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args(argv)
    print(f"load average at the start: {load()}")
    with tempfile.TemporaryDirectory(prefix="lens-cli-start-bench-") as tmp:
        runs = measure(args.rounds, Path(tmp))
    report(runs)
    print(f"load average at the end: {load()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
