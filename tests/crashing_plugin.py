"""A drop-in plugin whose `analyze` divides by zero in a helper of its own file: the CLI and the
dashboard must show its author that file and line, and the traceback."""

from __future__ import annotations

from pathlib import Path

SLUG = "zero-share"
TITLE = "Zero share"
FILE_NAME = "zero_share.py"
RAISING = "return total / parts  # **not bold**: a traceback is text, not Markdown"
SOURCE = f'''
from pulsar_lens.api import AnalysisPlugin, BaseModel, Metric, Result


def share(total, parts):
    {RAISING}


class ZeroShare(AnalysisPlugin):
    name = "{SLUG}"
    title = "{TITLE}"
    description = "Each topic's share of nothing."
    version = "1"
    inputs = ("topics",)
    outputs = ("x",)

    class Params(BaseModel):
        pass

    def analyze(self, data, params):
        topics = data.latest("topics")
        share(len(topics), 0)
        return Result(frames={{"x": topics[["topic"]]}})

    def render(self, result):
        return [Metric("rows", len(result.frames["x"]))]


PLUGINS = (ZeroShare,)
'''


def write_plugin(folder: Path) -> Path:
    """The drop-in written into `folder` (made if missing); its path."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / FILE_NAME
    path.write_text(SOURCE)
    return path


def raising_line() -> int:
    """The line of the division, in the written file."""
    return SOURCE.splitlines().index(f"    {RAISING}") + 1
