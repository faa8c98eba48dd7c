"""The memory allocators of `pulsar-lens`'s processes: Arrow's pool (jemalloc, not pyarrow's
mimalloc), the C library's mmap threshold (fixed at 4 MiB, not glibc's sliding one) and no
transparent huge pages.

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
counts address space, which an arena reserved up front uses up. The analyses' helper
processes fork from the same server and take the collect process's pool back
(`use_arrow_pool`).

Transparent huge pages are turned off for the command's process and its children
(`prctl(PR_SET_THP_DISABLE)`, which every child inherits, through `exec` too) unless
`HUGE_PAGES_ENV` is `system`. numpy asks for them (`madvise`) on every array of 4 MiB or more,
and where the machine is a virtual one that gives free memory back to its host (a balloon's
free page reporting: here every free block of 8 MiB, `page_reporting_order=11`, the blocks
huge pages are cut from), which the host backs again only when they are touched. A fresh
2 MiB page then cost some 25 ms to fault in against 1.2-1.6 ms for the same memory in 4 KiB
pages: 256 MiB touched took 3.4-4.2 s of system time, 0.15-0.2 s without them. Where the
kernel gives huge pages to every mapping that can hold one (`enabled` = `always`), a light
pass at 100,000 topics with full windows took 16.0-18.5 s with them and 9.0-10.1 s without
(one process, on a copy of one store); under `madvise` (numpy's arrays alone) the same.

docs/performance.md ("Arrow's allocator", "The C library's mmap threshold", "Transparent huge
pages") has the figures that chose these.
"""

from __future__ import annotations

import ctypes
from collections.abc import Mapping
from typing import Any

from pulsar_lens.core.errors import SettingsError
from pulsar_lens.core.settings import export

ARROW_POOL_ENV = "ARROW_DEFAULT_MEMORY_POOL"
ARROW_POOL = "jemalloc"
"""The pool our processes use (a name `ARROW_POOL_ENV` takes)."""

MMAP_THRESHOLD_ENV = "MALLOC_MMAP_THRESHOLD_"
MMAP_THRESHOLD = 4 << 20
"""Bytes from which glibc's malloc maps memory of its own, given back when freed."""
M_MMAP_THRESHOLD = -3  # mallopt's number for it (malloc.h)

HUGE_PAGES_ENV = "PULSAR_LENS_HUGE_PAGES"
HUGE_PAGES = ("off", "system")
"""`off` (the default): no transparent huge page in our processes; `system`: as the kernel's
setting (`/sys/kernel/mm/transparent_hugepage/enabled`) and each library's `madvise` say."""
PR_SET_THP_DISABLE = 41  # prctl's numbers (linux/prctl.h)
PR_GET_THP_DISABLE = 42


def choose_allocators(environ: Mapping[str, str]) -> None:
    """Make `ARROW_POOL` Arrow's allocator and `MMAP_THRESHOLD` glibc's mmap threshold in this
    process and the children it starts, each unless `environ` (the process's environment when
    it started) chose one already; and turn transparent huge pages off for them, or back to
    the system's with `HUGE_PAGES_ENV` `system` (SettingsError for another value). Arrow
    reads its choice when pyarrow is imported: a process that imported it before keeps the
    pool it has."""
    export({ARROW_POOL_ENV: ARROW_POOL})
    set_huge_pages(huge_pages_choice(environ) == "system")
    if MMAP_THRESHOLD_ENV in environ or "mmap_threshold" in environ.get("GLIBC_TUNABLES", ""):
        return  # glibc took it when the process started
    export({MMAP_THRESHOLD_ENV: str(MMAP_THRESHOLD)})
    set_mmap_threshold(MMAP_THRESHOLD)


def huge_pages_choice(environ: Mapping[str, str]) -> str:
    """`HUGE_PAGES_ENV` of `environ` (`off` when unset or empty); SettingsError for a value
    that is neither of `HUGE_PAGES`."""
    value = environ.get(HUGE_PAGES_ENV, "").strip().lower() or "off"
    if value not in HUGE_PAGES:
        raise SettingsError(
            f"{HUGE_PAGES_ENV} is {environ[HUGE_PAGES_ENV]!r}: it takes "
            + " or ".join(repr(v) for v in HUGE_PAGES),
            setting=HUGE_PAGES_ENV,
        )
    return value


def set_huge_pages(allowed: bool) -> bool:
    """`prctl(PR_SET_THP_DISABLE)`: this process and the children it starts from now on fault
    in no transparent huge page (`allowed` False), or as the system says (True). False where
    there is no such call (not Linux) or the kernel refuses it."""
    prctl = _prctl()
    return prctl is not None and prctl(PR_SET_THP_DISABLE, 0 if allowed else 1, 0, 0, 0) == 0


def huge_pages_off() -> bool | None:
    """Whether this process has transparent huge pages turned off (None: it cannot tell)."""
    prctl = _prctl()
    if prctl is None:
        return None
    found = prctl(PR_GET_THP_DISABLE, 0, 0, 0, 0)
    return None if found < 0 else bool(found)


def _prctl() -> Any:
    try:
        prctl = ctypes.CDLL(None).prctl
    except (OSError, AttributeError):
        return None
    prctl.argtypes = [ctypes.c_int, *[ctypes.c_ulong] * 4]
    prctl.restype = ctypes.c_int
    return prctl


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


def arrow_pool() -> str:
    """The name of this process's Arrow memory pool (`jemalloc`, `mimalloc` or `system`)."""
    import pyarrow as pa

    return str(pa.default_memory_pool().backend_name)


def use_arrow_pool(name: str) -> bool:
    """Make pool `name` (as `arrow_pool` names it) this process's Arrow pool from now on;
    False when this pyarrow has no such pool. For a process forked from one that chose
    another: the analyses helpers fork from the plugins' forkserver, whose pool is the
    system allocator (`plugins.isolation`), and with it reading two polls' consumers at
    1,000,000 topics took 1.2-2.2 s against 0.6-1.0 s with jemalloc (every large buffer a
    fresh mapping of the kernel's)."""
    import pyarrow as pa

    pools = {
        "jemalloc": pa.jemalloc_memory_pool,
        "mimalloc": pa.mimalloc_memory_pool,
        "system": pa.system_memory_pool,
    }
    if name not in pools:
        return False
    try:
        pool = pools[name]()
    except NotImplementedError:  # a build without it
        return False
    pa.set_memory_pool(pool)
    return True
