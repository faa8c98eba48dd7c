"""Plugins for the split-pass tests, importable by the helper process they are sent to."""

from __future__ import annotations

import os
from typing import ClassVar

import pandas as pd
import pyarrow as pa

from pulsar_lens.api import AnalysisPlugin, BaseModel, Inputs, Metric, Result, View


class WhereAmI(AnalysisPlugin):
    """Stores the process id it ran in and its Arrow memory pool; exits that process unless
    it is `home` (when set)."""

    name = "where-am-i"
    title = "Where am I"
    description = "The process that analysed the snapshot."
    version = "1"
    inputs = ("topics",)
    outputs = ("pid",)
    home: ClassVar[int | None] = None

    def __init__(self, home: int | None = None) -> None:
        self.home_pid = home

    def analyze(self, data: Inputs, params: BaseModel) -> Result:
        if self.home_pid is not None and os.getpid() != self.home_pid:
            os._exit(3)  # a helper that dies mid-pass
        rows = len(data.latest("topics"))
        pool = pa.default_memory_pool().backend_name
        frame = pd.DataFrame({"pid": [os.getpid()], "rows": [rows], "arrow_pool": [pool]})
        return Result(frames={"pid": frame})

    def render(self, result: Result, params: BaseModel | None = None) -> list[View]:
        return [Metric("pid", int(result.frames["pid"]["pid"].iloc[0]))]


class AlsoWhere(WhereAmI):
    name = "also-where"
    title = "Also where"


class Follower(WhereAmI):
    """Builds on `where-am-i`: must run in the same process, after it."""

    name = "follower"
    title = "Follower"
    requires = ("where-am-i",)
