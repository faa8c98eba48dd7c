"""What the analysis benchmarks share: a step's clock, and results compared frame for frame."""

from __future__ import annotations

import gc
import time
from collections.abc import Callable
from typing import Any

import pandas as pd

from pulsar_lens.api import Result


def clock(step: Callable[[], Any]) -> tuple[Any, float, float]:
    """The step's value, its wall seconds and its CPU seconds."""
    gc.collect()
    wall, cpu = time.perf_counter(), time.process_time()
    value = step()
    return value, time.perf_counter() - wall, time.process_time() - cpu


def same_result(new: Result, old: Result) -> str:
    """ "equal" when both results have equal frames and summaries; raises otherwise."""
    for name, frame in old.frames.items():
        pd.testing.assert_frame_equal(new.frames[name], frame, obj=name)
    if new.summary != old.summary:
        raise AssertionError(f"summaries differ: {new.summary} != {old.summary}")
    return "equal"
