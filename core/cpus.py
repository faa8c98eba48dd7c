"""The CPUs this process may use, as a container or a CPU set limits them."""

from __future__ import annotations

import os
from pathlib import Path


def usable_cpus() -> float:
    """CPUs this process may use: its affinity, capped by a cgroup v2 CPU quota (`cpu.max`,
    as a container's `--cpus` sets it)."""
    try:
        cpus = float(len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        cpus = float(os.cpu_count() or 1)
    try:
        quota, period = Path("/sys/fs/cgroup/cpu.max").read_text().split()[:2]
        if quota != "max":
            cpus = min(cpus, int(quota) / int(period))
    except (OSError, ValueError):
        pass
    return cpus
