"""Arrow's allocator in the processes of `pulsar-lens`: not mimalloc, pyarrow's default.

pyarrow's wheels make mimalloc Arrow's default memory pool. In a fresh process it spent most
of its time in the kernel: reading the same two Parquet files of 126 MB (the consumers of two
polls of 100,000 topics) took 0.9-1.0 s the first time and 0.7-0.9 s the second with mimalloc,
0.1-0.15 s with jemalloc or the C library's malloc; the process spent 5.4 s of system time
against 0.4 s. A poll builds its tables in fresh memory each time (the bulk parts' workers
give theirs back after each answer), and so does each light analysis. docs/performance.md,
"Arrow's allocator", has the whole-poll figures that chose `ARROW_POOL`.

Arrow reads its choice from `ARROW_POOL_ENV` once, when pyarrow is imported: the CLI sets it
before any command runs (`choose_arrow_pool`), so the command's own process and every child
it starts (the collector's part workers, the dashboard, Spark's Python workers) take it, and a
choice already in the environment is kept. Plugin workers get the system allocator whatever
this says (`plugins.isolation`): their memory limit counts address space, which an arena
reserved up front uses up.
"""

from __future__ import annotations

from pulsar_lens.core.settings import export

ARROW_POOL_ENV = "ARROW_DEFAULT_MEMORY_POOL"
ARROW_POOL = "jemalloc"
"""The pool our processes use (a name `ARROW_POOL_ENV` takes)."""


def choose_arrow_pool() -> None:
    """Make `ARROW_POOL` Arrow's allocator in this process and the children it starts,
    unless the environment chose one already. Arrow reads the choice when pyarrow is
    imported: a process that imported it before keeps the pool it has."""
    export({ARROW_POOL_ENV: ARROW_POOL})
