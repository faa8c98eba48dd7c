"""The allocators of our processes (`core.allocators`): the CLI chooses Arrow's pool and glibc's
mmap threshold and turns transparent huge pages off before a command runs, its children
inherit them, and a choice in the environment is kept. (Plugin workers keep the system
allocator their memory limit needs: tests/faults/test_plugin_faults.py.)"""

from __future__ import annotations

import ctypes
import json
import os
import subprocess
import sys

import pyarrow as pa

from pulsar_lens.core.allocators import (
    ARROW_POOL,
    ARROW_POOL_ENV,
    HUGE_PAGES_ENV,
    MMAP_THRESHOLD,
    MMAP_THRESHOLD_ENV,
    arrow_pool,
    huge_pages_off,
    use_arrow_pool,
)

# a command that imports pyarrow (`hash` hashes with it), then what Arrow, glibc and the kernel
# do in this process and in a spawned child of the collector's part pool; huge pages allowed
# first, as in a process whose parent did not turn them off (this test run's does)
CHILD = """
import json, sys
from pulsar_lens.core.allocators import set_huge_pages
assert set_huge_pages(True)
from pulsar_lens.cli.main import main
main(["hash", "--json", "k"])
from pulsar_lens.collectors.bulkparts import PartPool
from tests.core.test_allocators import allocators
parts = PartPool(1)
try:
    worker = PartPool._submit(parts._pool(), allocators).result(timeout=120)
finally:
    parts.close()
print(json.dumps([allocators(), worker]), file=sys.stderr)
"""


class MallInfo2(ctypes.Structure):
    """glibc's `struct mallinfo2` (malloc.h, glibc 2.33 and later)."""

    _fields_ = [
        (name, ctypes.c_size_t)
        for name in (
            "arena",
            "ordblks",
            "smblks",
            "hblks",
            "hblkhd",
            "usmblks",
            "fsmblks",
            "uordblks",
            "fordblks",
            "keepcost",
        )
    ]


def allocators() -> dict[str, object]:
    """Arrow's pool; whether glibc serves 3 MiB and 8 MiB from its arenas (below the mmap
    threshold) or as a mapping of their own (`hblks`, the mapped blocks, grows by one); the
    threshold's variable; whether transparent huge pages are off."""
    libc = ctypes.CDLL(None)
    libc.malloc.restype = ctypes.c_void_p
    libc.malloc.argtypes = [ctypes.c_size_t]
    libc.free.argtypes = [ctypes.c_void_p]
    libc.mallinfo2.restype = MallInfo2
    from_arena = {}
    for size in (3 << 20, 8 << 20):
        before = libc.mallinfo2().hblks
        address = libc.malloc(size)
        assert address
        from_arena[size >> 20] = libc.mallinfo2().hblks == before
        libc.free(address)
    return {
        "arrow": pa.default_memory_pool().backend_name,
        "arena_3": from_arena[3],
        "arena_8": from_arena[8],
        "threshold": os.environ.get(MMAP_THRESHOLD_ENV),
        "huge_pages_off": huge_pages_off(),
    }


def run_child(env: dict[str, str]) -> list[dict[str, object]]:
    done = subprocess.run(
        [sys.executable, "-c", CHILD], env=env, capture_output=True, text=True, timeout=180
    )
    assert done.returncode == 0, done.stderr
    found: list[dict[str, object]] = json.loads(done.stderr.strip().splitlines()[-1])
    return found


def unset(*names: str) -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k not in names}


def test_a_command_and_its_children_use_the_chosen_allocators() -> None:
    chosen = {"arrow": ARROW_POOL, "arena_3": True, "arena_8": False, "huge_pages_off": True}
    found = run_child(unset(ARROW_POOL_ENV, MMAP_THRESHOLD_ENV, HUGE_PAGES_ENV))
    assert found == [{**chosen, "threshold": str(MMAP_THRESHOLD)}] * 2


def test_allocators_chosen_in_the_environment_are_kept() -> None:
    env = {
        **os.environ,
        ARROW_POOL_ENV: "system",
        MMAP_THRESHOLD_ENV: str(16 << 20),
        HUGE_PAGES_ENV: "system",
    }
    chosen = {
        "arrow": "system",
        "arena_3": True,
        "arena_8": True,
        "threshold": str(16 << 20),
        "huge_pages_off": False,
    }
    assert run_child(env) == [chosen] * 2


def test_a_huge_pages_choice_it_does_not_know_is_refused_before_the_command_runs() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "pulsar_lens.cli.main", "hash", "k"],
        env={**os.environ, HUGE_PAGES_ENV: "always"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2, done
    assert done.stdout == ""
    assert f"{HUGE_PAGES_ENV} is 'always': it takes 'off' or 'system'" in done.stderr


def test_without_the_choice_glibc_maps_3_mib_of_its_own() -> None:
    """What the first test tells apart: a fresh process's glibc maps 3 MiB of its own."""
    done = subprocess.run(
        [sys.executable, "-c", f"from {__name__} import allocators; print(allocators())"],
        env=unset(MMAP_THRESHOLD_ENV),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert "'arena_3': False" in done.stdout


def test_a_named_arrow_pool_becomes_this_processs_and_an_unknown_name_changes_nothing() -> None:
    before = arrow_pool()
    try:
        assert use_arrow_pool("system") and arrow_pool() == "system"
        assert not use_arrow_pool("tcmalloc") and arrow_pool() == "system"
    finally:
        use_arrow_pool(before)
    assert arrow_pool() == before
