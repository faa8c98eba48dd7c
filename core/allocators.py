"""The memory allocators of `pulsar-lens`'s processes: Arrow's pool (jemalloc, not pyarrow's
mimalloc) and the C library's mmap threshold (fixed at 4 MiB, not glibc's sliding one).

pyarrow's wheels make mimalloc Arrow's default memory pool. In a fresh process it spent most
of its time in the kernel: reading the same two Parquet files of 126 MB (the consumers of two
polls of 100,000 topics) took 0.9-1.0 s the first time and 0.7-0.9 s the second with mimalloc,
0.1-0.15 s with jemalloc or the C library's malloc; the process spent 5.4 s of system time
against 0.4 s. A poll builds its tables in fresh memory each time (the bulk parts' workers
give theirs back after each answer), and so does each light analysis.

glibc serves a request of `M_MMAP_THRESHOLD` bytes or more with a mapping of its own, given
back when freed; smaller ones come from its heaps, which keep what is freed. By default the
threshold slides up (to 32 MiB) each time such a mapping is freed, so after the first poll
the numpy arrays and Python buffers of a poll and of its analyses (up to tens of MB each) came
from the heaps and stayed there, fragmented: over six polls of 100,000 topics the collect
process's peak rose from 0.77 to 1.84 GiB. With the threshold fixed at 4 MiB it rose from 0.75
to 1.29 GiB, in about the same time.

Arrow reads its choice from `ARROW_POOL_ENV` once, when pyarrow is imported, and glibc reads
`MMAP_THRESHOLD_ENV` when a process starts: the CLI sets both before any command runs
(`choose_allocators`), and sets this process's threshold itself (`mallopt`), so the command's
own process and every child it starts (the collector's part workers, the dashboard, Spark's
Python workers) take them. A choice already in the environment is kept. Plugin workers get
the system allocator for Arrow whatever this says (`plugins.isolation`): their memory limit
counts address space, which an arena reserved up front uses up. docs/performance.md ("Arrow's
allocator", "The C library's mmap threshold") has the figures that chose these.
"""

from __future__ import annotations

import ctypes
from collections.abc import Mapping

from pulsar_lens.core.settings import export

ARROW_POOL_ENV = "ARROW_DEFAULT_MEMORY_POOL"
ARROW_POOL = "jemalloc"
"""The pool our processes use (a name `ARROW_POOL_ENV` takes)."""

MMAP_THRESHOLD_ENV = "MALLOC_MMAP_THRESHOLD_"
MMAP_THRESHOLD = 4 << 20
"""Bytes from which glibc's malloc maps memory of its own, given back when freed."""
M_MMAP_THRESHOLD = -3  # mallopt's number for it (malloc.h)


def choose_allocators(environ: Mapping[str, str]) -> None:
    """Make `ARROW_POOL` Arrow's allocator and `MMAP_THRESHOLD` glibc's mmap threshold in this
    process and the children it starts, each unless `environ` (the process's environment when
    it started) chose one already. Arrow reads its choice when pyarrow is imported: a process
    that imported it before keeps the pool it has."""
    export({ARROW_POOL_ENV: ARROW_POOL})
    if MMAP_THRESHOLD_ENV in environ or "mmap_threshold" in environ.get("GLIBC_TUNABLES", ""):
        return  # glibc took it when the process started
    export({MMAP_THRESHOLD_ENV: str(MMAP_THRESHOLD)})
    set_mmap_threshold(MMAP_THRESHOLD)


def set_mmap_threshold(size: int) -> bool:
    """`mallopt(M_MMAP_THRESHOLD, size)` in this process; False where the C library has no
    such call (not glibc) or refuses it."""
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    return bool(mallopt(M_MMAP_THRESHOLD, size))
